/*
 * echo_server ADDR [THREADS]
 *
 * A Homa echo server: THREADS worker threads (default 2) share one endpoint
 * bound to ADDR ("127.0.0.1:4000", "[::1]:0", port 0 for any) and answer
 * every request with its own bytes. Prints "listening on IP:PORT" once
 * ready. A request whose bytes are "quit" is answered "bye"; then the
 * server shuts down (the other workers' blocked calls return -ESHUTDOWN)
 * and exits 0.
 *
 *   cc -o echo_server echo_server.c $(pkg-config --cflags --libs homars) -lpthread
 */
#include <homars.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static homars_endpoint *ep;

static void *worker(void *arg)
{
    long served = 0;
    (void)arg;
    for (;;) {
        homars_msg *req;
        int r = homars_recv_request(ep, -1, &req);
        if (r == -ESHUTDOWN)
            break;
        if (r < 0) {
            fprintf(stderr, "echo_server: recv_request: %s (%s)\n",
                    homars_strerror(r), homars_last_error());
            exit(1);
        }
        int quit = req->len == 4 && memcmp(req->data, "quit", 4) == 0;
        if (quit)
            r = homars_reply(ep, &req->rpc, "bye", 3);
        else
            r = homars_reply(ep, &req->rpc, req->data, req->len);
        /* A request can be dropped by its client meanwhile (ENOENT). */
        if (r < 0 && r != -ENOENT && r != -ESHUTDOWN) {
            fprintf(stderr, "echo_server: reply: %s (%s)\n",
                    homars_strerror(r), homars_last_error());
            exit(1);
        }
        homars_msg_free(req);
        served++;
        if (quit) {
            homars_shutdown(ep); /* releases the other workers */
            break;
        }
    }
    return (void *)served;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s ADDR [THREADS]\n", argv[0]);
        return 2;
    }
    int threads = argc == 3 ? atoi(argv[2]) : 2;
    if (threads < 1 || threads > 64) {
        fprintf(stderr, "echo_server: THREADS must be 1..64\n");
        return 2;
    }
    int r = homars_bind(argv[1], NULL, &ep);
    if (r < 0) {
        fprintf(stderr, "echo_server: bind %s: %s (%s)\n", argv[1],
                homars_strerror(r), homars_last_error());
        return 1;
    }
    char addr[HOMARS_ADDRSTRLEN];
    homars_local_addr(ep, addr, sizeof addr);
    printf("listening on %s\n", addr);
    fflush(stdout);

    pthread_t tid[64];
    for (int i = 0; i < threads; i++)
        pthread_create(&tid[i], NULL, worker, NULL);
    long served = 0;
    for (int i = 0; i < threads; i++) {
        void *n;
        pthread_join(tid[i], &n);
        served += (long)n;
    }
    homars_metrics m;
    homars_get_metrics(ep, &m);
    printf("served %ld requests (%llu delivered)\n", served,
           (unsigned long long)m.requests_delivered);
    homars_close(ep);
    return 0;
}
