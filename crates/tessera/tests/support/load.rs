//! Concurrent RESP clients whose every operation goes into a `History`: the load the chaos,
//! E-Cast and Rubberband real-process tests run while they inject faults. Each client sends
//! sequential commands over registers `g{group}.{member}` and counters `c{n}`, moving to
//! another port after a connection error. A write without a reply (or answered TRYAGAIN) is
//! recorded as pending: the checker may place it anywhere after its call, or nowhere.

use super::{arguments, History, RespClient};
use resp::Value;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use stdx::Prng;

const GROUPS: u64 = 3;
const GROUP_SIZE: u64 = 2;
const COUNTERS: u64 = 2;

/// Which commands the clients send.
#[derive(Clone, Copy, Debug)]
pub enum Mix {
    /// One replica group: mostly single-key commands, MSET/MGET over a group now and then.
    Replicated,
    /// A partitioned cluster: more MSET/MGET/DEL over a group, whose members sit in
    /// different partitions, so they are multi-partition messages.
    Partitioned,
}

#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    pub clients: u64,
    /// Client `c` draws its commands from `Prng::new(seed + c)`.
    pub seed: u64,
    pub mix: Mix,
    /// The last client switches its connections to `READMODE snapshot`.
    pub snapshot_client: bool,
    /// A pause after every command.
    pub pause: Option<Duration>,
    /// Every error reply leaves a write pending (unknown outcome), not only TRYAGAIN (a `vr`
    /// partition answers errors of its own while a group changes view).
    pub errors_pending: bool,
}

struct State {
    history: History,
    started: Instant,
    stop: AtomicBool,
    /// Microseconds since start at which the latest successful operation was invoked.
    last_success_call_us: AtomicU64,
    completed: AtomicU64,
    /// Reads the snapshot client completed.
    snapshot_reads: AtomicU64,
    ports: Vec<u16>,
    options: LoadOptions,
}

impl State {
    fn now_us(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }
}

/// Running clients; `finish` stops them, reads every key once more and checks the history.
pub struct Load {
    state: Arc<State>,
    clients: Vec<JoinHandle<()>>,
}

impl Load {
    pub fn start(ports: Vec<u16>, options: LoadOptions) -> Load {
        let state = Arc::new(State {
            history: History::default(),
            started: Instant::now(),
            stop: AtomicBool::new(false),
            last_success_call_us: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            snapshot_reads: AtomicU64::new(0),
            ports,
            options,
        });
        let clients = (0..options.clients)
            .map(|client| {
                let state = state.clone();
                std::thread::spawn(move || client_loop(&state, client))
            })
            .collect();
        Load { state, clients }
    }

    /// Microseconds since the load started (the history's clock).
    pub fn now_us(&self) -> u64 {
        self.state.now_us()
    }

    pub fn completed(&self) -> u64 {
        self.state.completed.load(Ordering::Relaxed)
    }

    pub fn snapshot_reads(&self) -> u64 {
        self.state.snapshot_reads.load(Ordering::Relaxed)
    }

    pub fn operations(&self) -> usize {
        self.state.history.operations.lock().unwrap().len()
    }

    /// Waits until an operation invoked after `since_us` succeeded; returns how long that took
    /// from `since_us`, in milliseconds.
    pub fn wait_for_progress(&self, since_us: u64, what: &str) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(15);
        let resumed = || self.state.last_success_call_us.load(Ordering::Relaxed) > since_us;
        while !resumed() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(resumed(), "no operation succeeded within 15 s after {what}");
        (self.now_us() - since_us) / 1000
    }

    /// Stops the clients and reads every register and counter once more through the first
    /// of `ports` that accepts a connection (a lost write shows up here).
    pub fn stop_and_read_back(&mut self, ports: &[u16]) {
        self.state.stop.store(true, Ordering::SeqCst);
        for client in self.clients.drain(..) {
            client.join().unwrap();
        }
        let mut client = ports
            .iter()
            .find_map(|port| RespClient::connect(*port, Duration::from_millis(500)).ok())
            .expect("a process accepts connections");
        let mut keys: Vec<String> = (0..GROUPS)
            .flat_map(|group| (0..GROUP_SIZE).map(move |member| register(group, member)))
            .collect();
        keys.extend((0..COUNTERS).map(|counter| format!("c{counter}")));
        for key in keys {
            let command = arguments(&["GET", &key]);
            let call = self.now_us();
            let value = client.call(&command).expect("final read");
            assert!(
                !matches!(value, Value::Error(_)),
                "final read of {key} failed: {value:?}"
            );
            self.state
                .history
                .record(1_000, call, Some(self.now_us()), command, Some(value));
        }
    }

    /// The checker's verdict on the whole history (a canary expects a violation).
    pub fn verdict(&self) -> lincheck::CheckResult {
        self.state.history.verdict()
    }

    /// Checks the whole history for linearisability (panics with the verdict if it is not).
    pub fn check(&self) {
        self.state.history.check();
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
    }
}

fn register(group: u64, member: u64) -> String {
    format!("g{group}.{member}")
}

fn next_command(mix: Mix, prng: &mut Prng, client: u64, sequence: u64) -> Vec<Vec<u8>> {
    let unique = format!("{client}-{sequence}");
    let group = prng.below(GROUPS);
    let key = register(group, prng.below(GROUP_SIZE));
    let counter = format!("c{}", prng.below(COUNTERS));
    let pair = [register(group, 0), register(group, 1)];
    let mset = || {
        arguments(&[
            "MSET",
            &pair[0],
            &format!("{unique}a"),
            &pair[1],
            &format!("{unique}b"),
        ])
    };
    match (mix, prng.below(100)) {
        (Mix::Replicated, 0..=29) | (Mix::Partitioned, 0..=24) => {
            arguments(&["SET", &key, &unique])
        }
        (Mix::Replicated, 30..=59) | (Mix::Partitioned, 25..=44) => arguments(&["GET", &key]),
        (Mix::Replicated, 60..=69) | (Mix::Partitioned, 45..=54) => arguments(&["INCR", &counter]),
        (Mix::Replicated, 70..=74) | (Mix::Partitioned, 55..=59) => arguments(&["GET", &counter]),
        (Mix::Replicated, 75..=82) | (Mix::Partitioned, 60..=66) => {
            arguments(&["APPEND", &key, &format!("|{unique}")])
        }
        (Mix::Replicated, 83..=90) | (Mix::Partitioned, 67..=80) => mset(),
        (Mix::Replicated, 91..=96) | (Mix::Partitioned, 81..=94) => {
            arguments(&["MGET", &pair[0], &pair[1]])
        }
        (Mix::Replicated, _) => arguments(&["DEL", &key]),
        (Mix::Partitioned, _) => arguments(&["DEL", &pair[0], &pair[1]]),
    }
}

fn is_read(command: &[Vec<u8>]) -> bool {
    matches!(command[0].as_slice(), b"GET" | b"MGET")
}

fn client_loop(state: &State, client: u64) {
    let options = state.options;
    let snapshot = options.snapshot_client && client == options.clients - 1;
    let mut prng = Prng::new(options.seed + client);
    let mut sequence = 0;
    let mut target = client as usize % state.ports.len();
    let mut connection: Option<RespClient> = None;
    while !state.stop.load(Ordering::Relaxed) {
        if connection.is_none() {
            match RespClient::connect(state.ports[target], Duration::from_millis(200)) {
                Ok(mut connected) => {
                    // Snapshot reads are timestamped by the lead router with `not_before`,
                    // so they are linearisable too.
                    if snapshot {
                        let mode = connected.call(&arguments(&["READMODE", "snapshot"]));
                        if !matches!(mode, Ok(Value::Simple(_))) {
                            continue;
                        }
                    }
                    connection = Some(connected);
                }
                Err(_) => {
                    target = (target + 1) % state.ports.len();
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            }
        }
        sequence += 1;
        let command = next_command(options.mix, &mut prng, client, sequence);
        let call = state.now_us();
        let reply = connection.as_mut().expect("connected above").call(&command);
        let returned = state.now_us();
        match reply {
            Ok(Value::Error(text)) if options.errors_pending || text.starts_with("TRYAGAIN") => {
                if !is_read(&command) {
                    state.history.record(client, call, None, command, None);
                }
            }
            Ok(value) => {
                if snapshot && is_read(&command) {
                    state.snapshot_reads.fetch_add(1, Ordering::Relaxed);
                }
                state
                    .history
                    .record(client, call, Some(returned), command, Some(value));
                state
                    .last_success_call_us
                    .fetch_max(call, Ordering::Relaxed);
                state.completed.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                if !is_read(&command) {
                    state.history.record(client, call, None, command, None);
                }
                connection = None;
                target = (target + 1) % state.ports.len();
            }
        }
        if let Some(pause) = options.pause {
            std::thread::sleep(pause);
        }
    }
}
