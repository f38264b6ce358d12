/*
 * threads_test: one endpoint shared by many threads. A server endpoint with
 * 3 worker threads in homars_recv_request; a client endpoint shared by 4
 * threads each making 150 calls of varied sizes (every response checked
 * byte for byte, none may be another thread's); then homars_shutdown from
 * the main thread releases threads blocked in homars_recv_request and
 * homars_recv_response with -ESHUTDOWN, promptly. Closing line "N passed,
 * N failed"; exits 1 if any check failed.
 */
#include "check.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define WORKERS 3
#define CLIENTS 4
#define CALLS 150

static homars_endpoint *server, *client;
static char server_addr[HOMARS_ADDRSTRLEN];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
    long served = 0;
    (void)arg;
    for (;;) {
        homars_msg *m;
        int r = homars_recv_request(server, -1, &m);
        if (r == -ESHUTDOWN)
            break;
        if (r < 0) {
            pthread_mutex_lock(&lock);
            CHECK(0, "worker: recv_request %d", r);
            pthread_mutex_unlock(&lock);
            break;
        }
        homars_reply(server, &m->rpc, m->data, m->len);
        homars_msg_free(m);
        served++;
    }
    return (void *)served;
}

static void *caller(void *arg)
{
    long me = (long)arg, ok = 0;
    for (int i = 0; i < CALLS; i++) {
        size_t len = (size_t)((me * 1000 + i) * 7919) % 70000;
        uint8_t *msg = pattern((uint64_t)(me << 32 | i), len);
        homars_msg *m;
        int r = homars_call(client, server_addr, msg, len, 20000, &m);
        int good = r == 0 && m->len == len && memcmp(m->data, msg, len) == 0;
        if (!good) {
            pthread_mutex_lock(&lock);
            CHECK(good, "caller %ld call %d: r %d len %zu", me, i, r, r == 0 ? m->len : 0);
            pthread_mutex_unlock(&lock);
        } else {
            ok++;
        }
        if (r == 0)
            homars_msg_free(m);
        free(msg);
    }
    return (void *)ok;
}

struct blocked {
    homars_endpoint *ep;
    homars_rpc rpc; /* id 0: wait for a request instead */
    int result;
};

static void *block(void *arg)
{
    struct blocked *b = arg;
    homars_msg *m;
    if (b->rpc.id)
        b->result = homars_recv_response(b->ep, &b->rpc, -1, &m);
    else
        b->result = homars_recv_request(b->ep, -1, &m);
    return NULL;
}

int main(void)
{
    MUST(homars_bind("127.0.0.1:0", NULL, &server));
    MUST(homars_bind("127.0.0.1:0", NULL, &client));
    homars_local_addr(server, server_addr, sizeof server_addr);

    pthread_t workers[WORKERS], callers[CLIENTS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&workers[i], NULL, worker, NULL);
    for (long i = 0; i < CLIENTS; i++)
        pthread_create(&callers[i], NULL, caller, (void *)i);
    long ok = 0, served = 0;
    for (int i = 0; i < CLIENTS; i++) {
        void *n;
        pthread_join(callers[i], &n);
        ok += (long)n;
    }
    CHECK(ok == CLIENTS * CALLS, "%ld of %d calls good", ok, CLIENTS * CALLS);

    /* Workers blocked in recv_request; one client thread blocked in
     * recv_response for an RPC nobody answers (a server endpoint that never
     * reads requests). */
    homars_endpoint *mute;
    MUST(homars_bind("127.0.0.1:0", NULL, &mute));
    char mute_addr[HOMARS_ADDRSTRLEN];
    homars_local_addr(mute, mute_addr, sizeof mute_addr);
    struct blocked waiting = {.ep = client};
    MUST(homars_send_request(client, mute_addr, "hold", 4, &waiting.rpc));
    struct blocked idle = {.ep = client};
    pthread_t w1, w2;
    pthread_create(&w1, NULL, block, &waiting);
    pthread_create(&w2, NULL, block, &idle);
    usleep(100 * 1000); /* let them block */

    MUST(homars_shutdown(server));
    for (int i = 0; i < WORKERS; i++) {
        void *n;
        pthread_join(workers[i], &n);
        served += (long)n;
    }
    CHECK(served == CLIENTS * CALLS, "served %ld", served);

    MUST(homars_shutdown(client));
    pthread_join(w1, NULL);
    pthread_join(w2, NULL);
    CHECK(waiting.result == -ESHUTDOWN, "recv_response: %d", waiting.result);
    CHECK(idle.result == -ESHUTDOWN, "recv_request: %d", idle.result);

    homars_close(mute);
    homars_close(server);
    homars_close(client);
    return report("threads_test");
}
