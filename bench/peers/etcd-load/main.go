// etcd-load drives an etcd cluster with the same closed-loop workload as `tessera bench kv`:
// N concurrent clients, each with exactly one request in flight, uniform keys "key:%012d" over a
// key space, fixed-size values, a percentage of linearizable Gets (the rest are Puts), a warm-up
// that is not measured, then a measured period. Latency is recorded per request, from the call to
// its return, in an HDR histogram (1 us .. 60 s, 3 significant digits, as tessera bench kv).
// The result prints as one line and, with -json, as a JSON file in the shape tessera bench kv writes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

type latency struct {
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P99  int64   `json:"p99"`
	P999 int64   `json:"p999"`
	Max  int64   `json:"max"`
	Mean float64 `json:"mean"`
}

type result struct {
	Label        string  `json:"label"`
	Nodes        string  `json:"nodes"`
	Clients      int     `json:"clients"`
	Pipeline     int     `json:"pipeline"`
	Keys         uint64  `json:"keys"`
	ValueSize    int     `json:"value_size"`
	ReadPercent  int     `json:"read_percent"`
	Distribution string  `json:"distribution"`
	Seconds      float64 `json:"seconds"`
	Operations   int64   `json:"operations"`
	Errors       int64   `json:"errors"`
	Throughput   float64 `json:"throughput_ops_per_s"`
	Latency      latency `json:"latency_us"`
	Connections  int     `json:"connections"`
}

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated etcd client endpoints (every connection dials all of them; gRPC balances round-robin)")
	clients := flag.Int("clients", 16, "concurrent clients (goroutines), each with one request in flight")
	conns := flag.Int("conns", 0, "gRPC connections (etcd clients) shared by the clients round-robin; 0 = min(clients, 8)")
	keys := flag.Uint64("keys", 100000, "distinct keys")
	valueSize := flag.Int("value-size", 100, "value size in bytes")
	readPercent := flag.Int("read-percent", 50, "percentage of linearizable Gets; the rest are Puts")
	duration := flag.Float64("duration", 10, "measured seconds (after warm-up)")
	warmup := flag.Float64("warmup", 1, "warm-up seconds, not measured")
	timeout := flag.Duration("timeout", 5*time.Second, "per-request timeout (a timed-out request counts as an error)")
	jsonPath := flag.String("json", "", "write the result as JSON here")
	label := flag.String("label", "etcd", "a label for the result")
	seed := flag.Uint64("seed", 1, "PRNG seed for keys and operations")
	flag.Parse()
	if *clients <= 0 || *keys == 0 || *readPercent < 0 || *readPercent > 100 {
		fmt.Fprintln(os.Stderr, "--clients and --keys must be positive, --read-percent in 0..100")
		os.Exit(2)
	}
	if *conns <= 0 {
		*conns = min(*clients, 8)
	}
	*conns = min(*conns, *clients)

	eps := strings.Split(*endpoints, ",")
	etcds := make([]*clientv3.Client, *conns)
	for i := range etcds {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   eps,
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "cannot connect to %s: %v\n", *endpoints, err)
			os.Exit(1)
		}
		defer c.Close()
		etcds[i] = c
	}
	// Fail early and clearly if the cluster does not answer.
	{
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := etcds[0].Get(ctx, "key:probe")
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "etcd at %s does not answer: %v\n", *endpoints, err)
			os.Exit(1)
		}
	}

	value := strings.Repeat("x", *valueSize)
	var measuring, stop atomic.Bool
	var completed atomic.Int64
	histograms := make([]*hdrhistogram.Histogram, *clients)
	errors := make([]int64, *clients)
	var wg sync.WaitGroup
	for client := 0; client < *clients; client++ {
		histograms[client] = hdrhistogram.New(1, 60_000_000, 3)
		wg.Add(1)
		go func(client int) {
			defer wg.Done()
			kv := etcds[client%len(etcds)]
			prng := rand.New(rand.NewPCG(*seed, uint64(client)))
			h := histograms[client]
			for !stop.Load() {
				key := fmt.Sprintf("key:%012d", prng.Uint64N(*keys))
				read := prng.IntN(100) < *readPercent
				ctx, cancel := context.WithTimeout(context.Background(), *timeout)
				started := time.Now()
				var err error
				if read {
					_, err = kv.Get(ctx, key) // linearizable (the default)
				} else {
					_, err = kv.Put(ctx, key, value)
				}
				elapsed := time.Since(started)
				cancel()
				if !measuring.Load() {
					continue
				}
				if err != nil {
					errors[client]++
				}
				micros := max(1, min(elapsed.Microseconds(), 60_000_000))
				_ = h.RecordValue(micros)
				completed.Add(1)
			}
		}(client)
	}

	time.Sleep(time.Duration(*warmup * float64(time.Second)))
	completed.Store(0)
	measuring.Store(true)
	started := time.Now()
	lastPrint, lastDone := started, int64(0)
	for {
		time.Sleep(100 * time.Millisecond)
		elapsed := time.Since(started).Seconds()
		finished := elapsed >= *duration
		if time.Since(lastPrint) >= 500*time.Millisecond || finished {
			done := completed.Load()
			rate := float64(done-lastDone) / time.Since(lastPrint).Seconds()
			fmt.Fprintf(os.Stderr, "  %3.0f%% %d ops, %.0f ops/s, %.1fs\n", min(1, elapsed / *duration)*100, done, rate, elapsed)
			lastPrint, lastDone = time.Now(), done
		}
		if finished {
			break
		}
	}
	stop.Store(true)
	seconds := time.Since(started).Seconds()
	wg.Wait()

	total := hdrhistogram.New(1, 60_000_000, 3)
	var errorCount int64
	for client := range histograms {
		total.Merge(histograms[client])
		errorCount += errors[client]
	}
	operations := total.TotalCount()
	r := result{
		Label: *label, Nodes: *endpoints, Clients: *clients, Pipeline: 1, Keys: *keys,
		ValueSize: *valueSize, ReadPercent: *readPercent, Distribution: "Uniform",
		Seconds: seconds, Operations: operations, Errors: errorCount,
		Throughput: float64(operations) / seconds,
		Latency: latency{
			P50: total.ValueAtQuantile(50), P90: total.ValueAtQuantile(90),
			P99: total.ValueAtQuantile(99), P999: total.ValueAtQuantile(99.9),
			Max: total.Max(), Mean: total.Mean(),
		},
		Connections: *conns,
	}
	fmt.Printf("%s: %d clients over %d connections, %d keys, %d B values, %d%% reads (linearizable), Uniform\n",
		r.Label, r.Clients, r.Connections, r.Keys, r.ValueSize, r.ReadPercent)
	fmt.Printf("  %.0f ops/s over %.1fs (%d ops, %d errors); latency us: p50 %d p90 %d p99 %d p99.9 %d max %d mean %.0f\n",
		r.Throughput, r.Seconds, r.Operations, r.Errors, r.Latency.P50, r.Latency.P90, r.Latency.P99,
		r.Latency.P999, r.Latency.Max, r.Latency.Mean)
	if *jsonPath != "" {
		data, _ := json.Marshal(r)
		if err := os.WriteFile(*jsonPath, append(data, '\n'), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "cannot write %s: %v\n", *jsonPath, err)
			os.Exit(1)
		}
	}
}
