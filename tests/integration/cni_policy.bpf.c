// SPDX-License-Identifier: MIT
/*
 * A stand-in for a CNI's policy program on a pod's host-side interface (test_cni_order.sh): what
 * it does to the pod's DNS (UDP to port 53 over IPv4) must happen whatever ndcache attaches to the
 * same hook. "drop" is a NetworkPolicy that forbids DNS (TC_ACT_SHOT); "mark" is a CNI that takes
 * DNS to its own proxy (FQDN policies): it marks the packet and hands it to the stack, a verdict
 * that ends the hook. Everything else goes on to the next filter (TC_ACT_UNSPEC), as a policy
 * that allows it would let the rest of the hook run. Each counts what it saw in `counts[0]`.
 * "reply", on egress, counts the DNS replies that reach the pod and lets everything go on.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>

#define SEC(name) __attribute__((section(name), used))

/*
 * Read by the test (bpftool map lookup): [0] the pod's DNS packets the programs saw, [1] the DNS
 * replies to the pod (UDP from port 53) that "reply" saw on egress. One array: the order of two
 * variables in .bss is the compiler's.
 */
__attribute__((section(".bss"), used)) unsigned long long counts[2];

static __attribute__((always_inline)) int is_dns(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp;

	if ((void *)(ip + 1) > end || eth->h_proto != __builtin_bswap16(ETH_P_IP) ||
	    ip->protocol != IPPROTO_UDP || ip->ihl != 5)
		return 0;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end || udp->dest != __builtin_bswap16(53))
		return 0;
	__sync_fetch_and_add(&counts[0], 1);
	return 1;
}

SEC("classifier/drop")
int policy_drop(struct __sk_buff *skb)
{
	return is_dns(skb) ? TC_ACT_SHOT : TC_ACT_UNSPEC;
}

SEC("classifier/mark")
int policy_mark(struct __sk_buff *skb)
{
	if (!is_dns(skb))
		return TC_ACT_UNSPEC;
	skb->mark = 0x4e44; /* where a CNI's proxy rule would pick it up */
	return TC_ACT_OK;
}

/* On egress: a policy that looks at what reaches the pod and lets it go on (TC_ACT_UNSPEC). */
SEC("classifier/reply")
int policy_reply(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) <= end && eth->h_proto == __builtin_bswap16(ETH_P_IP) &&
	    ip->protocol == IPPROTO_UDP && ip->ihl == 5 && udp->source == __builtin_bswap16(53))
		__sync_fetch_and_add(&counts[1], 1);
	return TC_ACT_UNSPEC;
}

char _license[] SEC("license") = "GPL";
