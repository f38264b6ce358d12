/*
 * homars.h - C API of homa-rs, a user-space implementation of the Homa
 * datacenter transport (receiver-driven RPCs over UDP, or raw IP protocol
 * 146 wire-compatible with Linux Homa).
 *
 * Link with -lhomars (pkg-config: homars). Linux only.
 *
 * CONVENTIONS
 *
 * Errors: every function returning int returns a value >= 0 on success
 *   (0, a length or a descriptor) and a NEGATIVE errno value on failure,
 *   e.g. -ETIMEDOUT. errno itself is not set. homars_strerror(ret) names the
 *   code; homars_last_error() describes this thread's last failure in a
 *   sentence with the details (sizes, addresses, configuration mistakes).
 *   The codes (positive values from <errno.h>):
 *     ETIMEDOUT     the timeout passed before the message came (with a
 *                   timeout of 0: nothing was waiting)
 *     EHOSTUNREACH  the peer stopped answering; the RPC failed
 *     EPROTO        the peer runs the other design (Homa vs SIRD)
 *     EMSGSIZE      a message exceeds the maximum message size (either end)
 *     ENOMSG        homars_recv_any_response with no RPC outstanding
 *     ESHUTDOWN     the endpoint was shut down
 *     EINVAL        a NULL pointer, a malformed address ("ip:port" only, no
 *                   name lookup), a bad timeout, an invalid configuration;
 *                   also from homars_bind for a port in use or an address
 *                   not of this host (homars_last_error says which)
 *     EPERM         raw IP transport without root / CAP_NET_RAW
 *     ENOENT        no such RPC (collected, failed, aborted, never existed)
 *     EALREADY      homars_reply to something not awaiting a reply (e.g.
 *                   answered already)
 *     ENOBUFS       an endpoint limit (max_rpcs, tx_buffer_limit,
 *                   max_peers) is reached; try again later
 *     EIO           an internal error (a caught panic) or an I/O error
 *                   without a code
 *     others        the operating system's own, from failed system calls
 *   An aborted RPC is forgotten at once: waiting for it afterwards gives
 *   ENOENT (there is no separate "cancelled" outcome).
 *
 * Timeouts: timeout_ms = -1 waits for ever, 0 only looks at what is
 *   already there, > 0 waits at most that many milliseconds.
 *
 * Ownership: every input (strings, buffers, homars_rpc) is only read during
 *   the call; message bytes are copied before it returns, so the caller may
 *   reuse them at once. Every received message is a homars_msg allocated by
 *   the library that the caller owns and must free with homars_msg_free
 *   (never free()); its bytes live as long as it does. An endpoint from
 *   homars_bind is freed with homars_close. Strings returned by
 *   homars_version are static; see homars_strerror and homars_last_error
 *   for theirs.
 *
 * Threads: every function may be called from any thread, and concurrently
 *   on the same endpoint (e.g. several threads in homars_recv_request, one
 *   in homars_call), except homars_close, which must be the endpoint's last
 *   call: first homars_shutdown (blocked calls return -ESHUTDOWN), join the
 *   threads that use it, then homars_close. Each endpoint runs a background
 *   thread of its own.
 *
 * Event loops: homars_ready_fd gives a descriptor for epoll/poll/select
 *   that is readable while a message waits to be collected, then collect
 *   with timeout 0 (see its comment).
 */
#ifndef HOMARS_H
#define HOMARS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of homars_rpc.peer, terminating NUL included. */
#define HOMARS_ADDRSTRLEN 72

/* An endpoint: one socket, any number of client and server RPCs. Opaque. */
typedef struct homars_endpoint homars_endpoint;

/*
 * Names one RPC. As in Linux Homa, the client's id is even and the
 * server's id of the same RPC is that plus one (odd). Filled in by the
 * library; pass it back as it is.
 */
typedef struct homars_rpc {
    uint64_t id;                    /* Homa's RPC id */
    char peer[HOMARS_ADDRSTRLEN];   /* the other end, "ip:port" or
                                       "[ipv6]:port", NUL-terminated */
} homars_rpc;

/* A received message. Allocated by the library; free with homars_msg_free. */
typedef struct homars_msg {
    homars_rpc rpc;        /* the RPC it belongs to: for a request, what to
                              pass to homars_reply */
    int status;            /* 0; or, from homars_recv_any_response only, the
                              negative errno of a failed RPC (len is 0) */
    const uint8_t *data;   /* the message; never NULL, valid until
                              homars_msg_free */
    size_t len;            /* its length in bytes */
} homars_msg;

/* A few counters (homars_metrics_json has them all). */
typedef struct homars_metrics {
    uint64_t requests_started;         /* requests sent as a client */
    uint64_t requests_delivered;       /* requests delivered to this server */
    uint64_t responses_delivered;      /* responses delivered to this client */
    uint64_t rpcs_failed;              /* client RPCs that failed */
    uint64_t rpcs_aborted;             /* RPCs aborted (timed-out calls too) */
    uint64_t peers_dead;               /* RPCs given up: peer stopped answering */
    uint64_t timeouts;                 /* timer rounds that probed a silent peer */
    uint64_t resends_requested;        /* RESENDs sent after a timeout */
    uint64_t restarts;                 /* client RPCs restarted (server lost them) */
    uint64_t active_rpcs;              /* gauge: RPCs alive (client and server) */
    uint64_t active_client_rpcs;       /* gauge: client RPCs alive */
    uint64_t data_bytes_sent;          /* message bytes sent (retransmissions too) */
    uint64_t data_bytes_retransmitted; /* message bytes sent again */
    uint64_t packets_sent;             /* packets handed to the kernel */
    uint64_t packets_received;         /* packets received */
    uint64_t send_drops;               /* packets the kernel refused (recovered) */
} homars_metrics;

/* The library's version, e.g. "0.1.0". Static. */
const char *homars_version(void);

/*
 * Opens an endpoint bound to addr ("127.0.0.1:4000", "[::1]:0"; port 0
 * picks a free port). The IP version of addr is that of every peer.
 * config_toml: the runtime's configuration as TOML text (keys as in
 * homa::Config, e.g. "poll_us = 0\n[core]\nmax_message_size = 2000000");
 * missing keys keep their defaults; NULL for all defaults.
 * On success stores the endpoint in *out and returns 0; on failure *out is
 * NULL.
 */
int homars_bind(const char *addr, const char *config_toml, homars_endpoint **out);

/*
 * Writes the bound address ("ip:port") into buf (cap bytes) like snprintf:
 * NUL-terminated, truncated to fit, and returns the address's full length
 * (excluding the NUL). buf may be NULL when cap is 0.
 */
int homars_local_addr(const homars_endpoint *ep, char *buf, size_t cap);

/*
 * Starts an RPC: sends a copy of buf[0..len) to dest ("ip:port") and
 * stores the RPC's name in *rpc. Collect the outcome with
 * homars_recv_response(rpc) or homars_recv_any_response, or abandon it with
 * homars_abort. buf may be NULL when len is 0. Returns 0.
 */
int homars_send_request(homars_endpoint *ep, const char *dest,
                        const void *buf, size_t len, homars_rpc *rpc);

/*
 * homars_send_request, then waits at most timeout_ms for the response; on
 * timeout the RPC is aborted (-ETIMEDOUT). On success stores the response
 * in *response and returns 0; on failure *response is NULL.
 */
int homars_call(homars_endpoint *ep, const char *dest, const void *buf,
                size_t len, int timeout_ms, homars_msg **response);

/*
 * Waits at most timeout_ms for the response of *rpc. On success stores it
 * in *response and returns 0. If the RPC failed returns its error
 * (-EHOSTUNREACH, -EMSGSIZE, ...); if it is unknown (collected already,
 * aborted) -ENOENT; a timeout leaves the RPC in progress. On failure
 * *response is NULL.
 */
int homars_recv_response(homars_endpoint *ep, const homars_rpc *rpc,
                         int timeout_ms, homars_msg **response);

/*
 * Waits at most timeout_ms for whichever outstanding client RPC finishes
 * first (RPCs another thread waits for with homars_recv_response are left
 * to that thread). Stores it in *response and returns 0: a response, or a
 * failed RPC as a message with status < 0 and len 0. With no RPC
 * outstanding returns -ENOMSG. On failure *response is NULL.
 */
int homars_recv_any_response(homars_endpoint *ep, int timeout_ms,
                             homars_msg **response);

/*
 * Waits at most timeout_ms for the next request. Stores it in *request and
 * returns 0; answer it with homars_reply(ep, &(*request)->rpc, ...). To
 * free the message before replying, copy its rpc first (a plain struct).
 * On failure *request is NULL.
 */
int homars_recv_request(homars_endpoint *ep, int timeout_ms,
                        homars_msg **request);

/*
 * Answers the request *rpc with a copy of buf[0..len). buf may be NULL when
 * len is 0. Returns 0.
 */
int homars_reply(homars_endpoint *ep, const homars_rpc *rpc,
                 const void *buf, size_t len);

/*
 * Abandons an RPC: a client RPC is forgotten (a response that still comes
 * is dropped; waiting for it gives -ENOENT), a server RPC is dropped
 * without a reply. Returns 0, or -ENOENT if there is no such RPC.
 */
int homars_abort(homars_endpoint *ep, const homars_rpc *rpc);

/*
 * A descriptor for epoll/poll/select, readable (POLLIN/EPOLLIN) while a
 * request or a client RPC's outcome (response or failure) waits to be
 * collected, and for good once the endpoint is shut down. Level-triggered:
 * it stays readable until everything waiting is collected, so it works
 * with level- and edge-triggered epoll alike. When it fires, collect with
 * timeout 0 (homars_recv_request and/or homars_recv_any_response) until
 * they return -ETIMEDOUT; it can be readable for a moment after another
 * thread has started to take the last message, so -ETIMEDOUT may also come
 * first. The endpoint owns the descriptor: only poll it, never read,
 * write or close it; it is closed by homars_close. Returns it (>= 0).
 */
int homars_ready_fd(homars_endpoint *ep);

/* Fills *out with the endpoint's main counters. Returns 0. */
int homars_get_metrics(const homars_endpoint *ep, homars_metrics *out);

/*
 * Writes every counter as one JSON object {"protocol": {...}, "runtime":
 * {...}} into buf (cap bytes) like snprintf, and returns the text's full
 * length (excluding the NUL). Call with buf NULL and cap 0 to learn the
 * size.
 */
int homars_metrics_json(const homars_endpoint *ep, char *buf, size_t cap);

/*
 * Shuts the endpoint down: calls blocked in it, in any thread, return
 * -ESHUTDOWN, as do later calls; RPCs in progress are abandoned; the ready
 * descriptor becomes readable. The endpoint must still be closed. Safe to
 * call while other threads use the endpoint, and more than once. Returns 0.
 */
int homars_shutdown(homars_endpoint *ep);

/*
 * Shuts the endpoint down if needed and frees it, releasing its port, its
 * background thread and its ready descriptor. Must be the last call on ep:
 * no other thread may be inside a call on it or use it afterwards. NULL is
 * ignored. Messages received from it stay valid until freed.
 */
void homars_close(homars_endpoint *ep);

/* Frees a received message and its bytes. NULL is ignored. */
void homars_msg_free(homars_msg *msg);

/*
 * Describes an errno value, negative (as returned) or positive. The string
 * is static for the codes listed above and otherwise valid until the next
 * homars_strerror call on the same thread.
 */
const char *homars_strerror(int err);

/*
 * This thread's most recent failure, naming the call and the details, or
 * "" if none yet. Also set when homars_recv_any_response hands over a
 * failed RPC. Not cleared by successful calls; valid until the next
 * failure on the same thread.
 */
const char *homars_last_error(void);

/* ---- Streams (RPC streaming): an ordered, reliable sequence of messages
 * each way between two homa-rs endpoints, with a window of
 * stream_window messages (see docs/protocol-notes.md, "RPC streaming").
 * Stream errors: -ECONNRESET the peer reset it, -ECONNREFUSED the peer
 * refused it, -ENOTCONN the peer never accepted it (dead, or no stream
 * support), -EHOSTUNREACH the peer died, -EPIPE send after finish. */
typedef struct homars_stream homars_stream;

/* Opens a stream to addr ("ip:port"); returns 0 at once with *out set
 * (a refusal shows in the stream's later calls). */
int homars_stream_open(homars_endpoint *ep, const char *addr, homars_stream **out);
/* Waits up to timeout_ms (-1 for ever, 0 only looks) for a stream a peer
 * opened; 0 with *out set. */
int homars_stream_accept(homars_endpoint *ep, int timeout_ms, homars_stream **out);
/* Sends a copy of buf, waiting up to timeout_ms for window room (0: -ENOBUFS
 * at once when full). Returns 0. */
int homars_stream_send(homars_stream *s, const void *buf, size_t len, int timeout_ms);
/* Next message in order: 1 with *msg set (free with homars_msg_free), 0 with
 * *msg NULL when the peer finished, or a negative errno. */
int homars_stream_recv(homars_stream *s, int timeout_ms, homars_msg **msg);
/* Ends our direction (idempotent). Returns 0. */
int homars_stream_finish(homars_stream *s);
/* Frees the stream; aborts it unless finished. The last call on s. */
void homars_stream_close(homars_stream *s);

#ifdef __cplusplus
}
#endif

#endif /* HOMARS_H */
