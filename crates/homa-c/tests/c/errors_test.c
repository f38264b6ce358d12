/*
 * errors_test: the C API's failures, as the Rust API's tests check them
 * (crates/homa/tests/errors.rs): bad addresses and configurations, NULL
 * arguments, timeouts, dead servers, sizes, unknown RPCs, double replies,
 * shutdown; plus the C-only parts (errno codes, strerror, last_error,
 * snprintf-style outputs, the ready descriptor). Prints each failed check
 * and a closing "N passed, N failed" line; exits 1 if any failed.
 */
#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* A UDP port where nothing listens: bound, never read. */
static int silent_port(char *addr, size_t cap)
{
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) < 0) {
        perror("silent port");
        exit(1);
    }
    snprintf(addr, cap, "127.0.0.1:%u", ntohs(a.sin_port));
    return s;
}

/* An echo server thread on its own endpoint, until shut down. */
static void *echo(void *arg)
{
    homars_endpoint *ep = arg;
    for (;;) {
        homars_msg *m;
        if (homars_recv_request(ep, -1, &m) < 0)
            return NULL;
        homars_reply(ep, &m->rpc, m->data, m->len);
        homars_msg_free(m);
    }
}

static void test_version_and_strerror(void)
{
    CHECK(strlen(homars_version()) > 0, "version is empty");
    static const int codes[] = {ETIMEDOUT, EHOSTUNREACH, EPROTO,  EMSGSIZE,
                                ENOMSG,    ESHUTDOWN,    EINVAL,  EPERM,
                                ENOENT,    EALREADY,     ENOBUFS, EIO};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *neg = homars_strerror(-codes[i]);
        const char *pos = homars_strerror(codes[i]);
        CHECK(neg && strlen(neg) > 0 && strcmp(neg, pos) == 0, "strerror(%d)", codes[i]);
    }
    CHECK(strstr(homars_strerror(-ESHUTDOWN), "shut down") != NULL, "ESHUTDOWN text");
    CHECK(strlen(homars_strerror(-EADDRINUSE)) > 0, "EADDRINUSE text");
    CHECK(strlen(homars_strerror(-1000000)) > 0, "unknown code text");
}

static void test_bind_errors(void)
{
    homars_endpoint *ep = (homars_endpoint *)&ep; /* must be cleared */
    CHECK_ERR(homars_bind("not an address", NULL, &ep), EINVAL);
    CHECK(ep == NULL, "*out not cleared on failure");
    CHECK(strstr(homars_last_error(), "not an address") != NULL, "last error names it");
    CHECK_ERR(homars_bind("localhost:0", NULL, &ep), EINVAL); /* no name lookup */
    CHECK_ERR(homars_bind("127.0.0.1", NULL, &ep), EINVAL);   /* no port */
    CHECK_ERR(homars_bind("127.0.0.1:0", "no_such_key = 1", &ep), EINVAL);
    CHECK(strstr(homars_last_error(), "no_such_key") != NULL, "last error names the key");
    CHECK_ERR(homars_bind("127.0.0.1:0", "[core]\nmtu = \"big\"", &ep), EINVAL);
    CHECK_ERR(homars_bind(NULL, NULL, &ep), EINVAL);
    CHECK_ERR(homars_bind("127.0.0.1:0", NULL, NULL), EINVAL);

    /* A valid TOML configuration is used. */
    MUST(homars_bind("127.0.0.1:0", "poll_us = 0\n[core]\nmax_message_size = 2000", &ep));
    char addr[HOMARS_ADDRSTRLEN];
    int n = homars_local_addr(ep, addr, sizeof addr);
    CHECK(n > 10 && (size_t)n == strlen(addr) && strncmp(addr, "127.0.0.1:", 10) == 0,
          "local_addr %d %s", n, addr);
    CHECK(homars_local_addr(ep, NULL, 0) == n, "local_addr size query");
    char small[4] = "xxx";
    CHECK(homars_local_addr(ep, small, sizeof small) == n && strcmp(small, "127") == 0,
          "local_addr truncates like snprintf: %s", small);
    homars_rpc rpc;
    uint8_t *big = pattern(1, 2001);
    CHECK_ERR(homars_send_request(ep, addr, big, 2001, &rpc), EMSGSIZE);
    CHECK(strstr(homars_last_error(), "2001") != NULL, "size in last error");
    free(big);

    /* The port is taken: the runtime calls that a bad address. */
    homars_endpoint *again = NULL;
    CHECK_ERR(homars_bind(addr, NULL, &again), EINVAL);
    CHECK(strstr(homars_last_error(), "in use") != NULL, "last error says in use");
    CHECK(again == NULL, "*out not cleared");
    /* Not an address of this host. */
    CHECK_ERR(homars_bind("192.0.2.1:0", NULL, &again), EINVAL);
    homars_close(ep);
    /* Closing releases it. */
    MUST(homars_bind(addr, NULL, &again));
    homars_close(again);
}

static void test_null_arguments(homars_endpoint *ep)
{
    homars_rpc rpc = {.id = 2, .peer = "127.0.0.1:9"};
    homars_msg *m = (homars_msg *)&m;
    homars_metrics met;
    CHECK_ERR(homars_local_addr(NULL, NULL, 0), EINVAL);
    CHECK_ERR(homars_local_addr(ep, NULL, 5), EINVAL);
    CHECK_ERR(homars_send_request(NULL, "127.0.0.1:9", "x", 1, &rpc), EINVAL);
    CHECK_ERR(homars_send_request(ep, NULL, "x", 1, &rpc), EINVAL);
    CHECK_ERR(homars_send_request(ep, "127.0.0.1:9", NULL, 1, &rpc), EINVAL);
    CHECK_ERR(homars_send_request(ep, "127.0.0.1:9", "x", 1, NULL), EINVAL);
    CHECK_ERR(homars_call(NULL, "127.0.0.1:9", "x", 1, 0, &m), EINVAL);
    CHECK(m == NULL, "*response not cleared");
    CHECK_ERR(homars_call(ep, "127.0.0.1:9", "x", 1, 0, NULL), EINVAL);
    CHECK_ERR(homars_recv_response(ep, NULL, 0, &m), EINVAL);
    CHECK_ERR(homars_recv_response(ep, &rpc, 0, NULL), EINVAL);
    CHECK_ERR(homars_recv_response(NULL, &rpc, 0, &m), EINVAL);
    CHECK_ERR(homars_recv_any_response(NULL, 0, &m), EINVAL);
    CHECK_ERR(homars_recv_any_response(ep, 0, NULL), EINVAL);
    CHECK_ERR(homars_recv_request(NULL, 0, &m), EINVAL);
    CHECK_ERR(homars_recv_request(ep, 0, NULL), EINVAL);
    CHECK_ERR(homars_reply(NULL, &rpc, "x", 1), EINVAL);
    CHECK_ERR(homars_reply(ep, NULL, "x", 1), EINVAL);
    CHECK_ERR(homars_reply(ep, &rpc, NULL, 1), EINVAL);
    CHECK_ERR(homars_abort(NULL, &rpc), EINVAL);
    CHECK_ERR(homars_abort(ep, NULL), EINVAL);
    CHECK_ERR(homars_ready_fd(NULL), EINVAL);
    CHECK_ERR(homars_get_metrics(NULL, &met), EINVAL);
    CHECK_ERR(homars_get_metrics(ep, NULL), EINVAL);
    CHECK_ERR(homars_metrics_json(NULL, NULL, 0), EINVAL);
    CHECK_ERR(homars_metrics_json(ep, NULL, 10), EINVAL);
    CHECK_ERR(homars_shutdown(NULL), EINVAL);
    CHECK(strstr(homars_last_error(), "NULL") != NULL, "last error says NULL");
    homars_msg_free(NULL);
    homars_close(NULL);
    /* A mangled rpc. */
    memset(rpc.peer, 'x', sizeof rpc.peer);
    CHECK_ERR(homars_abort(ep, &rpc), EINVAL); /* no NUL */
    strcpy(rpc.peer, "nowhere");
    CHECK_ERR(homars_reply(ep, &rpc, "x", 1), EINVAL);
    /* Bad timeouts and addresses. */
    CHECK_ERR(homars_recv_request(ep, -2, &m), EINVAL);
    CHECK_ERR(homars_send_request(ep, "127.0.0.1", "x", 1, &rpc), EINVAL);
    CHECK_ERR(homars_send_request(ep, "[::1]:9", "x", 1, &rpc), EINVAL); /* other IP version */
}

static void test_timeouts(homars_endpoint *ep)
{
    homars_msg *m;
    double t = now_ms();
    CHECK_ERR(homars_recv_request(ep, 20, &m), ETIMEDOUT);
    t = now_ms() - t;
    CHECK(t >= 19.5, "recv_request(20 ms) returned after %.1f ms", t);
    CHECK_ERR(homars_recv_request(ep, 0, &m), ETIMEDOUT);
    CHECK_ERR(homars_recv_any_response(ep, 0, &m), ENOMSG);

    /* A call to a port where nothing answers, shorter than dead-peer
     * detection: our timeout, and the RPC is aborted. */
    char silent[64];
    int s = silent_port(silent, sizeof silent);
    homars_metrics before, after;
    MUST(homars_get_metrics(ep, &before));
    t = now_ms();
    CHECK_ERR(homars_call(ep, silent, "hello?", 6, 5, &m), ETIMEDOUT);
    t = now_ms() - t;
    CHECK(t >= 4.5, "call(5 ms) returned after %.1f ms", t);
    MUST(homars_get_metrics(ep, &after));
    CHECK(after.rpcs_aborted == before.rpcs_aborted + 1 && after.active_client_rpcs == 0,
          "timed-out call aborted (%llu aborted, %llu active)",
          (unsigned long long)after.rpcs_aborted,
          (unsigned long long)after.active_client_rpcs);

    /* recv_response times out but, unlike call, leaves the RPC. */
    homars_rpc rpc;
    MUST(homars_send_request(ep, silent, "x", 1, &rpc));
    CHECK_ERR(homars_recv_response(ep, &rpc, 10, &m), ETIMEDOUT);
    CHECK(m == NULL, "no message on timeout");
    /* A longer wait: the protocol declares the peer dead (within the
     * wait, or the error would be ETIMEDOUT). */
    CHECK_ERR(homars_recv_response(ep, &rpc, 60000, &m), EHOSTUNREACH);
    close(s);
}

static void test_dead_server(homars_endpoint *client)
{
    homars_endpoint *server;
    MUST(homars_bind("127.0.0.1:0", NULL, &server));
    char addr[HOMARS_ADDRSTRLEN];
    homars_local_addr(server, addr, sizeof addr);
    homars_close(server);

    homars_msg *m;
    CHECK_ERR(homars_call(client, addr, "anyone?", 7, 60000, &m), EHOSTUNREACH);
    CHECK(m == NULL, "no message on failure");

    /* The same failure through recv_any_response: a message with status. */
    homars_rpc rpc;
    MUST(homars_send_request(client, addr, "x", 1, &rpc));
    MUST(homars_recv_any_response(client, 5000, &m));
    CHECK(m->rpc.id == rpc.id && m->status == -EHOSTUNREACH && m->len == 0 && m->data,
          "failed RPC as a message: id %llu status %d len %zu",
          (unsigned long long)m->rpc.id, m->status, m->len);
    CHECK(strstr(homars_last_error(), "not responding") != NULL, "last error says why");
    homars_msg_free(m);
    CHECK_ERR(homars_recv_any_response(client, 0, &m), ENOMSG);
}

static void test_echo_and_rpc_errors(homars_endpoint *client)
{
    homars_endpoint *server;
    MUST(homars_bind("127.0.0.1:0", NULL, &server));
    char addr[HOMARS_ADDRSTRLEN];
    homars_local_addr(server, addr, sizeof addr);
    pthread_t t;
    pthread_create(&t, NULL, echo, server);

    /* Echo of the largest message allowed; one byte more is refused. */
    size_t max = 1000000;
    uint8_t *msg = pattern(7, max + 1);
    homars_msg *m;
    MUST(homars_call(client, addr, msg, max, 20000, &m));
    CHECK(m->status == 0 && m->len == max && memcmp(m->data, msg, max) == 0, "1 MB echo");
    homars_msg_free(m);
    CHECK_ERR(homars_call(client, addr, msg, max + 1, 20000, &m), EMSGSIZE);
    homars_rpc rpc;
    CHECK_ERR(homars_send_request(client, addr, msg, max + 1, &rpc), EMSGSIZE);
    free(msg);
    /* An empty message. */
    MUST(homars_call(client, addr, NULL, 0, 20000, &m));
    CHECK(m->len == 0 && m->data != NULL, "empty echo");
    homars_msg_free(m);

    /* Collected once; then unknown. Aborted: unknown too. */
    MUST(homars_send_request(client, addr, "once", 4, &rpc));
    MUST(homars_recv_response(client, &rpc, 20000, &m));
    homars_msg_free(m);
    CHECK_ERR(homars_recv_response(client, &rpc, 0, &m), ENOENT);
    CHECK_ERR(homars_abort(client, &rpc), ENOENT);
    homars_rpc bogus = {.id = 12345678};
    strcpy(bogus.peer, addr);
    CHECK_ERR(homars_recv_response(client, &bogus, -1, &m), ENOENT);
    CHECK_ERR(homars_reply(client, &bogus, "x", 1), ENOENT);

    homars_shutdown(server);
    pthread_join(t, NULL);
    homars_close(server);

    /* Answering twice; answering a client RPC. A server we drive by hand. */
    MUST(homars_bind("127.0.0.1:0", NULL, &server));
    homars_local_addr(server, addr, sizeof addr);
    MUST(homars_send_request(client, addr, "q", 1, &rpc));
    homars_msg *req;
    MUST(homars_recv_request(server, 20000, &req));
    CHECK(req->rpc.id == (rpc.id | 1), "server id is client id + 1");
    MUST(homars_reply(server, &req->rpc, "a", 1));
    int r = homars_reply(server, &req->rpc, "b", 1);
    CHECK(r == -EALREADY || r == -ENOENT, "second reply: %d", r);
    homars_msg_free(req);
    MUST(homars_recv_response(client, &rpc, 20000, &m));
    CHECK(m->len == 1 && m->data[0] == 'a', "first reply wins");
    homars_msg_free(m);
    MUST(homars_send_request(client, addr, "q", 1, &rpc));
    CHECK_ERR(homars_reply(client, &rpc, "x", 1), EALREADY);
    MUST(homars_abort(client, &rpc));
    CHECK_ERR(homars_recv_response(client, &rpc, 0, &m), ENOENT);
    homars_close(server);
}

static void test_metrics_json(homars_endpoint *ep)
{
    int n = homars_metrics_json(ep, NULL, 0);
    CHECK(n > 100, "metrics_json size %d", n);
    /* (A live endpoint's counters may grow a digit between the calls.) */
    size_t cap = (size_t)n + 256;
    char *buf = malloc(cap);
    int got = homars_metrics_json(ep, buf, cap);
    CHECK(got >= n && (size_t)got < cap && strlen(buf) == (size_t)got, "metrics_json fills");
    n = got;
    CHECK(strncmp(buf, "{\"protocol\":", 12) == 0 && strstr(buf, "\"runtime\":") &&
              strstr(buf, "\"requests_started\":") && buf[n - 1] == '}',
          "metrics_json content: %.80s", buf);
    free(buf);
}

static void test_shutdown(void)
{
    homars_endpoint *ep;
    MUST(homars_bind("127.0.0.1:0", NULL, &ep));
    int fd = homars_ready_fd(ep);
    CHECK(fd >= 0, "ready_fd %d", fd);
    CHECK(homars_ready_fd(ep) == fd, "one descriptor");
    CHECK(!readable(fd), "idle endpoint not ready");
    char silent[64];
    int s = silent_port(silent, sizeof silent);
    homars_rpc pending;
    MUST(homars_send_request(ep, silent, "x", 1, &pending));
    MUST(homars_shutdown(ep));
    MUST(homars_shutdown(ep)); /* twice is harmless */
    CHECK(readable(fd), "ready after shutdown");
    homars_msg *m;
    homars_rpc rpc;
    CHECK_ERR(homars_send_request(ep, silent, "x", 1, &rpc), ESHUTDOWN);
    CHECK_ERR(homars_call(ep, silent, "x", 1, 1000, &m), ESHUTDOWN);
    CHECK_ERR(homars_recv_request(ep, -1, &m), ESHUTDOWN);
    CHECK_ERR(homars_recv_request(ep, 0, &m), ESHUTDOWN);
    CHECK_ERR(homars_recv_response(ep, &pending, -1, &m), ESHUTDOWN);
    CHECK_ERR(homars_recv_any_response(ep, 0, &m), ESHUTDOWN);
    homars_rpc server_rpc = {.id = 3};
    strcpy(server_rpc.peer, silent);
    CHECK_ERR(homars_reply(ep, &server_rpc, "x", 1), ESHUTDOWN);
    homars_metrics met;
    MUST(homars_get_metrics(ep, &met)); /* still readable */
    homars_close(ep);
    close(s);
}

int main(void)
{
    test_version_and_strerror();
    test_bind_errors();
    homars_endpoint *ep;
    MUST(homars_bind("127.0.0.1:0", NULL, &ep));
    test_null_arguments(ep);
    test_timeouts(ep);
    test_dead_server(ep);
    test_echo_and_rpc_errors(ep);
    test_metrics_json(ep);
    homars_close(ep);
    test_shutdown();
    return report("errors_test");
}
