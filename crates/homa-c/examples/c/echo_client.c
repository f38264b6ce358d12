/*
 * echo_client ADDR [--quit]
 *
 * Talks to an echo server at ADDR: calls with messages of 0 bytes to 1 MB
 * (homars_call), then 32 requests in flight at once collected in whatever
 * order they finish (homars_send_request + homars_recv_any_response). Every
 * response must equal its request byte for byte. With --quit, finally asks
 * the server to stop. Exits 0 if all went well.
 *
 *   cc -o echo_client echo_client.c $(pkg-config --cflags --libs homars)
 */
#include <homars.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_MS 20000
#define IN_FLIGHT 32

static homars_endpoint *ep;
static const char *server;

static void die(const char *what, int r)
{
    fprintf(stderr, "echo_client: %s: %s (%s)\n", what, homars_strerror(r),
            homars_last_error());
    exit(1);
}

/* len bytes that depend on tag, so a mixed-up response is caught. */
static uint8_t *pattern(uint64_t tag, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    uint64_t x = tag * 0x9E3779B97F4A7C15ull + len + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)(x >> 24);
    }
    return p;
}

static void check(const homars_msg *m, const uint8_t *want, size_t len, const char *what)
{
    if (m->status != 0)
        die(what, m->status);
    if (m->len != len || memcmp(m->data, want, len) != 0) {
        fprintf(stderr, "echo_client: %s: response differs (%zu bytes, want %zu)\n",
                what, m->len, len);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--quit") != 0)) {
        fprintf(stderr, "usage: %s ADDR [--quit]\n", argv[0]);
        return 2;
    }
    server = argv[1];
    /* Same IP version and interface as the server: loopback. */
    const char *local = server[0] == '[' ? "[::1]:0" : "127.0.0.1:0";
    int r = homars_bind(local, NULL, &ep);
    if (r < 0)
        die("bind", r);

    /* One call at a time, growing sizes up to the default maximum. */
    static const size_t sizes[] = {0, 1, 100, 1400, 10000, 100000, 1000000};
    int calls = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *msg = pattern(i, sizes[i]);
        homars_msg *resp;
        r = homars_call(ep, server, msg, sizes[i], TIMEOUT_MS, &resp);
        if (r < 0)
            die("call", r);
        check(resp, msg, sizes[i], "call");
        homars_msg_free(resp);
        free(msg);
        calls++;
    }

    /* Many in flight; responses come in any order. */
    homars_rpc rpcs[IN_FLIGHT];
    uint8_t *msgs[IN_FLIGHT];
    size_t lens[IN_FLIGHT];
    for (int i = 0; i < IN_FLIGHT; i++) {
        lens[i] = (size_t)(i * 7919) % 60000;
        msgs[i] = pattern(1000 + i, lens[i]);
        r = homars_send_request(ep, server, msgs[i], lens[i], &rpcs[i]);
        if (r < 0)
            die("send_request", r);
    }
    for (int n = 0; n < IN_FLIGHT; n++) {
        homars_msg *resp;
        r = homars_recv_any_response(ep, TIMEOUT_MS, &resp);
        if (r < 0)
            die("recv_any_response", r);
        int i = 0;
        while (i < IN_FLIGHT && rpcs[i].id != resp->rpc.id)
            i++;
        if (i == IN_FLIGHT || msgs[i] == NULL) {
            fprintf(stderr, "echo_client: response for an unknown RPC %llu\n",
                    (unsigned long long)resp->rpc.id);
            return 1;
        }
        check(resp, msgs[i], lens[i], "recv_any_response");
        homars_msg_free(resp);
        free(msgs[i]);
        msgs[i] = NULL;
        calls++;
    }
    homars_msg *none;
    r = homars_recv_any_response(ep, 0, &none);
    if (r != -ENOMSG)
        die("recv_any_response with nothing outstanding (want ENOMSG)", r);

    if (argc == 3) {
        homars_msg *bye;
        r = homars_call(ep, server, "quit", 4, TIMEOUT_MS, &bye);
        if (r < 0)
            die("quit", r);
        check(bye, (const uint8_t *)"bye", 3, "quit");
        homars_msg_free(bye);
    }
    homars_metrics m;
    homars_get_metrics(ep, &m);
    printf("echo_client: %d calls OK (%llu requests, %llu responses)\n", calls,
           (unsigned long long)m.requests_started,
           (unsigned long long)m.responses_delivered);
    homars_close(ep);
    return 0;
}
