/*
 * stream_test: streams through the C API: messages in order both ways
 * (an echo thread), the end (recv returns 0), send after finish (-EPIPE),
 * a full window (-ENOBUFS with timeout 0), a reset peer (-ECONNRESET) and
 * a peer without streams (-ECONNREFUSED). Prints the failed checks and a
 * closing "N passed, N failed" line; exits 1 if any failed.
 */
#include "check.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#define N 200
#define T 20000

static homars_endpoint *server, *client;

/* Echoes every message of the first stream accepted, then finishes. */
static void *echo(void *arg)
{
    (void)arg;
    homars_stream *s;
    MUST(homars_stream_accept(server, T, &s));
    homars_msg *m;
    int r;
    while ((r = homars_stream_recv(s, T, &m)) == 1) {
        MUST(homars_stream_send(s, m->data, m->len, -1));
        homars_msg_free(m);
    }
    CHECK(r == 0, "echo recv returned %d", r);
    MUST(homars_stream_finish(s));
    homars_stream_close(s);
    return NULL;
}

/* Receives the N echoes in order, then the end. */
static void *reader(void *arg)
{
    homars_stream *s = arg;
    homars_msg *m;
    for (int i = 0; i < N; i++) {
        int r = homars_stream_recv(s, T, &m);
        CHECK(r == 1, "echo %d: recv returned %d", i, r);
        if (r != 1)
            return NULL;
        size_t len = (size_t)(i * 37 % 3000);
        uint8_t *want = pattern((uint64_t)i, len);
        CHECK(m->len == len && memcmp(m->data, want, len) == 0, "echo %d differs", i);
        free(want);
        homars_msg_free(m);
    }
    CHECK(homars_stream_recv(s, T, &m) == 0 && m == NULL, "no end after %d", N);
    return NULL;
}

int main(void)
{
    char addr[HOMARS_ADDRSTRLEN];
    MUST(homars_bind("127.0.0.1:0", NULL, &server));
    MUST(homars_bind("127.0.0.1:0", NULL, &client));
    homars_local_addr(server, addr, sizeof addr);

    pthread_t e, r;
    pthread_create(&e, NULL, echo, NULL);
    homars_stream *s;
    MUST(homars_stream_open(client, addr, &s));
    pthread_create(&r, NULL, reader, s);
    for (int i = 0; i < N; i++) {
        size_t len = (size_t)(i * 37 % 3000);
        uint8_t *m = pattern((uint64_t)i, len);
        MUST(homars_stream_send(s, m, len, -1));
        free(m);
    }
    MUST(homars_stream_finish(s));
    CHECK_ERR(homars_stream_send(s, "x", 1, -1), EPIPE);
    pthread_join(r, NULL);
    pthread_join(e, NULL);
    homars_stream_close(s);

    /* Nobody reads: the window fills, a send with timeout 0 fails at once;
     * closing unfinished resets the peer. */
    MUST(homars_stream_open(client, addr, &s));
    int sent = 0, rc = 0;
    for (; sent < 1000; sent++) {
        rc = homars_stream_send(s, "x", 1, 0);
        if (rc != 0) {
            /* Room may come as acks arrive: only a long stall counts. */
            rc = homars_stream_send(s, "x", 1, 300);
            if (rc != 0)
                break;
        }
    }
    CHECK(rc == -ETIMEDOUT && sent < 1000, "sent %d, rc %d", sent, rc);
    CHECK_ERR(homars_stream_send(s, "x", 1, 0), ENOBUFS);
    homars_stream *a;
    MUST(homars_stream_accept(server, T, &a));
    homars_stream_close(s);
    homars_msg *m = NULL;
    int got;
    while ((got = homars_stream_recv(a, T, &m)) == 1)
        homars_msg_free(m);
    CHECK(got == -ECONNRESET, "after the reset: %d (%s)", got, homars_strerror(got));
    homars_stream_close(a);

    /* A peer with streams disabled refuses. */
    homars_endpoint *off;
    MUST(homars_bind("127.0.0.1:0", "[core]\nstream_window = 0\n", &off));
    homars_local_addr(off, addr, sizeof addr);
    MUST(homars_stream_open(client, addr, &s));
    homars_stream_send(s, "x", 1, -1);
    CHECK_ERR(homars_stream_recv(s, T, &m), ECONNREFUSED);
    homars_stream_close(s);

    homars_close(off);
    homars_close(client);
    homars_close(server);
    return report("stream_test");
}
