// A 500 KB message as a train of UDP datagrams against one TCP send, on loopback, without Homa:
// what each costs the sender and the receiver in CPU, and how many context switches each round takes.
//
// usage: train-vs-stream udp|tcp ROUNDS [pin]
//   udp: the sender sends 8 datagrams of 65,000 B (a 56-byte header and the payload as two iovecs,
//        as the runtime sends DATA packets), the receiver reads them one recv each;
//   tcp: the sender sends 520,000 B in one send call (TCP_NODELAY), the receiver reads until it has them.
//   Then the receiver answers with one byte, and the next round starts.
//   pin: the sender on CPU 0, the receiver on CPU 1 (default: wherever the scheduler puts them).
// Prints each side's CPU time (user + system) and context switches (voluntary + involuntary) per
// round, over all but the first tenth of the rounds.
// build: gcc -O2 -o train-vs-stream train-vs-stream.c
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define DGRAMS 8
#define DGRAM 65000
#define HDR 56
#define TOTAL (DGRAMS * DGRAM)

static double usage_of(int what) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    if (what == 0)
        return r.ru_utime.tv_sec * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_sec * 1e6 + r.ru_stime.tv_usec;
    return r.ru_nvcsw + r.ru_nivcsw;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) perror("sched_setaffinity");
}

static void report(const char *mode, const char *side, double c0, double s0, int n) {
    printf("%s %-8s cpu %6.1f us/round, %5.2f switches/round\n", mode, side, (usage_of(0) - c0) / n,
           (usage_of(1) - s0) / n);
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "udp") && strcmp(argv[1], "tcp")) || atoi(argv[2]) < 10) {
        fprintf(stderr, "usage: %s udp|tcp ROUNDS(>=10) [pin]\n", argv[0]);
        return 2;
    }
    int udp = !strcmp(argv[1], "udp"), rounds = atoi(argv[2]), pinned = argc > 3, warm = rounds / 10;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)}, b = a;
    socklen_t len = sizeof a;
    int big = 8 << 20, one = 1, snd, rcv;
    if (udp) {
        snd = socket(AF_INET, SOCK_DGRAM, 0);
        rcv = socket(AF_INET, SOCK_DGRAM, 0);
        setsockopt(rcv, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        setsockopt(snd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
        if (bind(snd, (void *)&a, sizeof a) || bind(rcv, (void *)&b, sizeof b)) return perror("bind"), 1;
        getsockname(snd, (void *)&a, &len);
        getsockname(rcv, (void *)&b, &len);
        connect(snd, (void *)&b, sizeof b);
        connect(rcv, (void *)&a, sizeof a);
    } else {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        if (bind(l, (void *)&a, sizeof a) || listen(l, 1)) return perror("bind"), 1;
        getsockname(l, (void *)&a, &len);
        snd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(snd, (void *)&a, sizeof a)) return perror("connect"), 1;
        rcv = accept(l, 0, 0);
        setsockopt(snd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(rcv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    pid_t child = fork();
    if (child == 0) {
        if (pinned) pin(1);
        char *buf = aligned_alloc(4096, 1 << 20), ack = 1;
        double c0 = 0, s0 = 0;
        for (int r = 0; r < rounds; r++) {
            if (r == warm) c0 = usage_of(0), s0 = usage_of(1);
            for (int got = 0, k = 0; udp ? k < DGRAMS : got < TOTAL; k++) {
                ssize_t n = udp ? recv(rcv, buf, 1 << 16, 0) : recv(rcv, buf + got, TOTAL - got, 0);
                if (n <= 0) return perror("recv"), 1;
                got += n;
            }
            if (send(rcv, &ack, 1, 0) != 1) return perror("send"), 1;
        }
        report(argv[1], "receiver", c0, s0, rounds - warm);
        return 0;
    }
    if (pinned) pin(0);
    char *src = aligned_alloc(4096, 1 << 20), hdr[HDR] = {0}, ack;
    memset(src, 7, 1 << 20);
    double c0 = 0, s0 = 0;
    for (int r = 0; r < rounds; r++) {
        if (r == warm) c0 = usage_of(0), s0 = usage_of(1);
        if (udp) {
            for (int k = 0; k < DGRAMS; k++) {
                struct iovec io[2] = {{hdr, HDR}, {src + k * (DGRAM - HDR), DGRAM - HDR}};
                struct msghdr m = {.msg_iov = io, .msg_iovlen = 2};
                if (sendmsg(snd, &m, 0) < 0) return perror("sendmsg"), 1;
            }
        } else {
            for (int sent = 0; sent < TOTAL;) {
                ssize_t n = send(snd, src + sent, TOTAL - sent, 0);
                if (n <= 0) return perror("send"), 1;
                sent += n;
            }
        }
        if (recv(snd, &ack, 1, 0) != 1) return perror("recv ack"), 1;
    }
    int st;
    waitpid(child, &st, 0);
    report(argv[1], "sender", c0, s0, rounds - warm);
    return 0;
}
