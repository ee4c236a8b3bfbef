// SPDX-License-Identifier: MIT
/*
 * egress_hook_bench.sh's sender: UDP datagrams of 32 bytes to DST:PORT, sendmmsg batches of 64,
 * for SECONDS, as fast as one CPU sends them. Prints "sent N wall_ns W cpu_ns C": the datagrams
 * the kernel took, the wall time and the process's CPU time (user and system) spent.
 * Usage: udp_blast DST PORT SECONDS
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64

static uint64_t now_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
	struct sockaddr_in dst = {.sin_family = AF_INET};
	static struct mmsghdr msgs[BATCH];
	static struct iovec iov[BATCH];
	static char payload[32] = "egress hook bench";
	uint64_t sent = 0, t0, c0, t1, c1, end;
	int fd, n;

	if (argc != 4 || inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1 || atoi(argv[2]) <= 0 ||
	    atoi(argv[3]) <= 0) {
		fprintf(stderr, "usage: udp_blast DST PORT SECONDS\n");
		return 2;
	}
	dst.sin_port = htons((uint16_t)atoi(argv[2]));
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
		perror("udp_blast: socket");
		return 1;
	}
	for (int i = 0; i < BATCH; i++) {
		iov[i].iov_base = payload;
		iov[i].iov_len = sizeof(payload);
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	t0 = now_ns(CLOCK_MONOTONIC);
	c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	end = t0 + (uint64_t)atoi(argv[3]) * 1000000000ULL;
	do {
		n = sendmmsg(fd, msgs, BATCH, 0);
		if (n > 0)
			sent += (uint64_t)n;
		else if (n < 0 && errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
			perror("udp_blast: sendmmsg");
			return 1;
		}
	} while ((t1 = now_ns(CLOCK_MONOTONIC)) < end);
	c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	printf("sent %llu wall_ns %llu cpu_ns %llu\n", (unsigned long long)sent,
	       (unsigned long long)(t1 - t0), (unsigned long long)(c1 - c0));
	return 0;
}
