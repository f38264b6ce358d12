/*
 * layout: prints the sizes and field offsets of the header's structures as
 * "name value" lines; the Rust test compares them with the library's
 * #[repr(C)] types, so the header and the library cannot drift apart.
 */
#include <homars.h>

#include <stddef.h>
#include <stdio.h>

#define SIZE(t) printf("sizeof %s %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("offsetof %s.%s %zu\n", #t, #f, offsetof(t, f))

int main(void)
{
    printf("HOMARS_ADDRSTRLEN %d\n", HOMARS_ADDRSTRLEN);
    SIZE(homars_rpc);
    OFF(homars_rpc, id);
    OFF(homars_rpc, peer);
    SIZE(homars_msg);
    OFF(homars_msg, rpc);
    OFF(homars_msg, status);
    OFF(homars_msg, data);
    OFF(homars_msg, len);
    SIZE(homars_metrics);
    OFF(homars_metrics, requests_started);
    OFF(homars_metrics, requests_delivered);
    OFF(homars_metrics, responses_delivered);
    OFF(homars_metrics, rpcs_failed);
    OFF(homars_metrics, rpcs_aborted);
    OFF(homars_metrics, peers_dead);
    OFF(homars_metrics, timeouts);
    OFF(homars_metrics, resends_requested);
    OFF(homars_metrics, restarts);
    OFF(homars_metrics, active_rpcs);
    OFF(homars_metrics, active_client_rpcs);
    OFF(homars_metrics, data_bytes_sent);
    OFF(homars_metrics, data_bytes_retransmitted);
    OFF(homars_metrics, packets_sent);
    OFF(homars_metrics, packets_received);
    OFF(homars_metrics, send_drops);
    return 0;
}
