/*
 * epoll_echo server ADDR
 * epoll_echo selftest [N]
 *
 * Homa endpoints in an epoll loop, through their ready descriptors
 * (homars_ready_fd): no thread ever blocks in the library.
 *
 * "server": an echo server on ADDR in one thread; prints "listening on
 * IP:PORT"; answers "quit" with "bye" and exits 0 (drive it with
 * echo_client).
 *
 * "selftest": a server and a client endpoint in one epoll set, in one
 * thread. The client keeps up to 16 of N requests (default 200, sizes up
 * to 200 KB) in flight; the server echoes them as they arrive; the client
 * checks every response. The server's descriptor is registered
 * level-triggered, the client's edge-triggered: both work, as the
 * descriptor stays readable until everything waiting is collected. Exits 0
 * if all N came back intact.
 *
 *   cc -o epoll_echo epoll_echo.c $(pkg-config --cflags --libs homars)
 */
#include <homars.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#define WINDOW 16
#define STALL_MS 20000 /* no event for this long: something is wrong */

static void die(const char *what, int r)
{
    fprintf(stderr, "epoll_echo: %s: %s (%s)\n", what, homars_strerror(r),
            homars_last_error());
    exit(1);
}

static homars_endpoint *bind_or_die(const char *addr)
{
    homars_endpoint *ep;
    int r = homars_bind(addr, NULL, &ep);
    if (r < 0)
        die("bind", r);
    return ep;
}

static void watch(int epfd, homars_endpoint *ep, uint32_t events)
{
    int fd = homars_ready_fd(ep);
    if (fd < 0)
        die("ready_fd", fd);
    struct epoll_event ev = {.events = events, .data.ptr = ep};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        perror("epoll_ctl");
        exit(1);
    }
}

/*
 * Answers every request waiting at ep (timeout 0: never blocks). Returns 1
 * if one of them was "quit".
 */
static int serve_ready(homars_endpoint *ep)
{
    int quit = 0;
    for (;;) {
        homars_msg *req;
        int r = homars_recv_request(ep, 0, &req);
        if (r == -ETIMEDOUT)
            return quit; /* nothing more waiting */
        if (r < 0)
            die("recv_request", r);
        if (req->len == 4 && memcmp(req->data, "quit", 4) == 0) {
            quit = 1;
            r = homars_reply(ep, &req->rpc, "bye", 3);
        } else {
            r = homars_reply(ep, &req->rpc, req->data, req->len);
        }
        if (r < 0 && r != -ENOENT)
            die("reply", r);
        homars_msg_free(req);
    }
}

static int wait_events(int epfd, struct epoll_event *evs, int max)
{
    int n = epoll_wait(epfd, evs, max, STALL_MS);
    if (n < 0 && errno != EINTR) {
        perror("epoll_wait");
        exit(1);
    }
    if (n == 0) {
        fprintf(stderr, "epoll_echo: no event for %d ms\n", STALL_MS);
        exit(1);
    }
    return n < 0 ? 0 : n;
}

static int run_server(const char *addr)
{
    homars_endpoint *ep = bind_or_die(addr);
    char local[HOMARS_ADDRSTRLEN];
    homars_local_addr(ep, local, sizeof local);
    printf("listening on %s\n", local);
    fflush(stdout);
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    watch(epfd, ep, EPOLLIN);
    for (;;) {
        struct epoll_event ev;
        int n = epoll_wait(epfd, &ev, 1, -1);
        if (n < 0 && errno != EINTR) {
            perror("epoll_wait");
            return 1;
        }
        if (n == 1 && serve_ready(ep))
            break;
    }
    homars_close(ep);
    printf("epoll_echo server: done\n");
    return 0;
}

/* Message number i: its length and bytes. */
static size_t msg_len(int i) { return (size_t)(i * 104729) % 200000; }

static uint8_t *pattern(int i)
{
    size_t len = msg_len(i);
    uint8_t *p = malloc(len ? len : 1);
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + len + 1;
    for (size_t k = 0; k < len; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[k] = (uint8_t)(x >> 24);
    }
    return p;
}

static int run_selftest(int total)
{
    homars_endpoint *server = bind_or_die("127.0.0.1:0");
    homars_endpoint *client = bind_or_die("127.0.0.1:0");
    char addr[HOMARS_ADDRSTRLEN];
    homars_local_addr(server, addr, sizeof addr);
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    watch(epfd, server, EPOLLIN);           /* level-triggered */
    watch(epfd, client, EPOLLIN | EPOLLET); /* edge-triggered */

    struct { uint64_t id; int n; uint8_t *bytes; } slot[WINDOW];
    int sent = 0, done = 0, in_flight = 0;
    for (int s = 0; s < WINDOW; s++)
        slot[s].bytes = NULL;
    while (done < total) {
        /* Keep the window full. */
        for (int s = 0; s < WINDOW && sent < total; s++) {
            if (slot[s].bytes)
                continue;
            homars_rpc rpc;
            slot[s].n = sent;
            slot[s].bytes = pattern(sent);
            int r = homars_send_request(client, addr, slot[s].bytes, msg_len(sent), &rpc);
            if (r < 0)
                die("send_request", r);
            slot[s].id = rpc.id;
            sent++;
            in_flight++;
        }
        struct epoll_event evs[2];
        int n = wait_events(epfd, evs, 2);
        for (int e = 0; e < n; e++) {
            homars_endpoint *ep = evs[e].data.ptr;
            if (ep == server) {
                serve_ready(server);
                continue;
            }
            /* Edge-triggered: collect everything now. */
            for (;;) {
                homars_msg *resp;
                int r = homars_recv_any_response(client, 0, &resp);
                if (r == -ETIMEDOUT || r == -ENOMSG)
                    break;
                if (r < 0)
                    die("recv_any_response", r);
                if (resp->status < 0)
                    die("an RPC failed", resp->status);
                int s = 0;
                while (s < WINDOW && !(slot[s].bytes && slot[s].id == resp->rpc.id))
                    s++;
                if (s == WINDOW) {
                    fprintf(stderr, "epoll_echo: response for an unknown RPC\n");
                    return 1;
                }
                size_t len = msg_len(slot[s].n);
                if (resp->len != len || memcmp(resp->data, slot[s].bytes, len) != 0) {
                    fprintf(stderr, "epoll_echo: response %d differs\n", slot[s].n);
                    return 1;
                }
                homars_msg_free(resp);
                free(slot[s].bytes);
                slot[s].bytes = NULL;
                in_flight--;
                done++;
            }
        }
    }
    /* Shutting down makes the descriptor readable: loops notice. */
    homars_shutdown(server);
    struct epoll_event ev;
    if (wait_events(epfd, &ev, 1) != 1 || ev.data.ptr != server) {
        fprintf(stderr, "epoll_echo: shutdown did not wake the loop\n");
        return 1;
    }
    homars_msg *none;
    int r = homars_recv_request(server, 0, &none);
    if (r != -ESHUTDOWN)
        die("recv_request after shutdown (want ESHUTDOWN)", r);
    homars_close(server);
    homars_close(client);
    printf("epoll_echo selftest: %d RPCs OK, %d left in flight\n", done, in_flight);
    return in_flight == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "server") == 0)
        return run_server(argv[2]);
    if ((argc == 2 || argc == 3) && strcmp(argv[1], "selftest") == 0) {
        int n = argc == 3 ? atoi(argv[2]) : 200;
        if (n < 1) {
            fprintf(stderr, "epoll_echo: N must be positive\n");
            return 2;
        }
        return run_selftest(n);
    }
    fprintf(stderr, "usage: %s server ADDR | %s selftest [N]\n", argv[0], argv[0]);
    return 2;
}
