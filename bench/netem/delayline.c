/* delayline: a userspace stand-in for `tc qdisc ... netem delay D` (the kernel this bench was
 * written on has no sch_netem). Creates N tun devices (tnm0..tnm{N-1}, IFF_TUN, no packet
 * info); run.sh moves tnmI into host I's network namespace and gives it 10.77.0.(I+1)/24. Every
 * IPv4 packet one namespace sends is held DELAY_US microseconds (one-way delay: a round trip
 * takes 2 x DELAY_US plus the relay's own cost) and then written to the tun device of the
 * namespace owning its destination address (10.77.0.X goes to device X-1); anything else is
 * dropped. One FIFO for all packets: the delay is constant, so order is kept per flow.
 *
 * Usage: delayline N DELAY_US      prints "ready" once the devices exist; runs until killed.
 * Build: cc -O2 -o delayline delayline.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_HOSTS 16
#define BUF 65536

struct packet {
    uint64_t due_ns;
    int to;
    int len;
    struct packet *next;
    unsigned char data[];
};

static int tun[MAX_HOSTS];
static int hosts;
static struct packet *head, *tail;
static unsigned long long forwarded, dropped;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int destination(const unsigned char *p, int len) {
    if (len < 20 || (p[0] >> 4) != 4) return -1;
    if (p[16] != 10 || p[17] != 77 || p[18] != 0) return -1;
    int host = (int)p[19] - 1;
    return host >= 0 && host < hosts ? host : -1;
}

static void deliver(int to, const unsigned char *data, int len) {
    if (write(tun[to], data, (size_t)len) == len) forwarded++;
    else dropped++;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: delayline N DELAY_US\n");
        return 2;
    }
    hosts = atoi(argv[1]);
    uint64_t delay_ns = (uint64_t)strtoull(argv[2], NULL, 10) * 1000ull;
    if (hosts < 1 || hosts > MAX_HOSTS) {
        fprintf(stderr, "delayline: N must be 1..%d\n", MAX_HOSTS);
        return 2;
    }
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* hrtimer wake-ups within ~1 ns of the asked time */
    int ep = epoll_create1(0);
    for (int i = 0; i < hosts; i++) {
        tun[i] = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
        if (tun[i] < 0) { perror("open /dev/net/tun"); return 1; }
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
        snprintf(ifr.ifr_name, IFNAMSIZ, "tnm%d", i);
        if (ioctl(tun[i], TUNSETIFF, &ifr) < 0) { perror("TUNSETIFF"); return 1; }
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, tun[i], &ev);
    }
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    struct epoll_event tev = {.events = EPOLLIN, .data.u32 = MAX_HOSTS};
    epoll_ctl(ep, EPOLL_CTL_ADD, timer, &tev);
    printf("ready %d devices, one-way delay %llu us\n", hosts, (unsigned long long)(delay_ns / 1000));
    fflush(stdout);

    static unsigned char buf[BUF];
    struct epoll_event events[MAX_HOSTS + 1];
    int armed = 0;
    for (;;) {
        int n = epoll_wait(ep, events, MAX_HOSTS + 1, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("epoll_wait");
            return 1;
        }
        for (int e = 0; e < n; e++) {
            uint32_t id = events[e].data.u32;
            if (id == MAX_HOSTS) {
                uint64_t expirations;
                if (read(timer, &expirations, sizeof expirations) < 0) { /* spurious */ }
                armed = 0;
                continue;
            }
            for (;;) {
                ssize_t len = read(tun[id], buf, BUF);
                if (len <= 0) break;
                int to = destination(buf, (int)len);
                if (to < 0) { dropped++; continue; }
                if (delay_ns == 0) { deliver(to, buf, (int)len); continue; }
                struct packet *p = malloc(sizeof *p + (size_t)len);
                if (!p) { dropped++; continue; }
                p->due_ns = now_ns() + delay_ns;
                p->to = to;
                p->len = (int)len;
                p->next = NULL;
                memcpy(p->data, buf, (size_t)len);
                if (tail) tail->next = p; else head = p;
                tail = p;
            }
        }
        uint64_t now = now_ns();
        while (head && head->due_ns <= now) {
            struct packet *p = head;
            head = p->next;
            if (!head) tail = NULL;
            deliver(p->to, p->data, p->len);
            free(p);
        }
        if (head && !armed) {
            struct itimerspec when = {0};
            when.it_value.tv_sec = (time_t)(head->due_ns / 1000000000ull);
            when.it_value.tv_nsec = (long)(head->due_ns % 1000000000ull);
            timerfd_settime(timer, TFD_TIMER_ABSTIME, &when, NULL);
            armed = 1;
        }
    }
}
