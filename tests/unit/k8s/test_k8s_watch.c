// SPDX-License-Identifier: MIT
/*
 * The list/watch client against tests/fakeapi/fake_apiserver.py over HTTPS on 127.0.0.1, with
 * certificates tests/fakeapi/make_certs.sh makes. One fresh server per test; its control port
 * scripts changes (apply/delete) and faults (compact, drop, token rotation, injected errors).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include <ndc/log.h>

#include "k8s/k8s.h"

#include "fixture.h"

/* ---- tests ------------------------------------------------------------------------------------
 */

static void first_sync(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	f->opts.kinds = ALL_KINDS | 1u << NDC_K8S_PODS;
	start(f);
	synced(f, f->opts.kinds, 1);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.begins[NDC_K8S_NAMESPACES], 1);
	assert_int_equal(f->rec.listed[NDC_K8S_NAMESPACES], N_NS);
	assert_int_equal(f->rec.listed[NDC_K8S_SERVICES], N_SVC);
	assert_int_equal(f->rec.listed[NDC_K8S_ENDPOINTSLICES], N_SLICE);
	assert_int_equal(f->rec.begins[NDC_K8S_PODS], 1);
	assert_int_equal(f->rec.listed[NDC_K8S_PODS], 0);
	/* The real server (and the fake) leave kind out of list items: the client adds it. */
	assert_int_equal(f->rec.bad_kind, 0);
	pthread_mutex_unlock(&f->rec.m);
	assert_true(listed_name(&f->rec, NDC_K8S_NAMESPACES, "kube-system"));
	assert_true(listed_name(&f->rec, NDC_K8S_SERVICES, "app/svc-4"));
	assert_true(listed_name(&f->rec, NDC_K8S_ENDPOINTSLICES, "app/svc-2-abcde"));
	/* Bookmarks every 0.5 s move the resourceVersion without events. */
	assert_true(WAIT_STAT(&f->rec, f->w, bookmarks, 4, 3000));
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.lists, 4);
	assert_int_equal(st.events, 0);
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.relists_410, 0);
	assert_int_equal(st.auth_failures, 0);
	assert_int_equal(server_stat("watches", "/api/v1/services"), 1);
	assert_int_equal(server_stat("watches", "/api/v1/pods"), 1);
}

static void pagination(void **state)
{
	struct fx *f = *state;

	/* Pages are what a consistent list has: a server that offers nothing cheaper. */
	control("{\"op\":\"refuse\",\"ways\":[\"stream\",\"cache\"]}");
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	f->opts.page_size = 2;
	start(f);
	synced(f, f->opts.kinds, 1);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.begins[NDC_K8S_SERVICES], 1);
	assert_int_equal(f->rec.listed[NDC_K8S_SERVICES], N_SVC);
	assert_int_equal(f->rec.ends[NDC_K8S_NAMESPACES], 0);
	pthread_mutex_unlock(&f->rec.m);
	for (int i = 0; i < N_SVC; i++) {
		char name[32];

		snprintf(name, sizeof(name), "app/svc-%d", i);
		assert_true(listed_name(&f->rec, NDC_K8S_SERVICES, name));
	}
	/* 5 objects at 2 per page: 3 requests, and the refused list from the cache. */
	assert_int_equal(server_stat("lists", "/api/v1/services"), 4);
}

static void events(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;
	int64_t t0;

	start(f);
	synced(f, ALL_KINDS, 1);
	t0 = now_ms();
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"Service\",\"metadata\":{\"name\":\"new\","
		"\"namespace\":\"app\"},\"spec\":{\"clusterIP\":\"10.96.1.1\"}}}");
	expect_line(f, "ADDED Service app/new", 1000);
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"Service\",\"metadata\":{\"name\":\"new\","
		"\"namespace\":\"app\"},\"spec\":{\"clusterIP\":\"10.96.1.2\"}}}");
	expect_line(f, "MODIFIED Service app/new", 1000);
	control("{\"op\":\"delete\",\"kind\":\"Service\",\"namespace\":\"app\",\"name\":\"new\"}");
	expect_line(f, "DELETED Service app/new", 1000);
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"Namespace\",\"metadata\":{\"name\":"
		"\"team\"}}}");
	expect_line(f, "ADDED Namespace team", 1000);
	control("{\"op\":\"delete\",\"kind\":\"EndpointSlice\",\"namespace\":\"app\",\"name\":"
		"\"svc-1-abcde\"}");
	expect_line(f, "DELETED EndpointSlice app/svc-1-abcde", 1000);
	assert_true(now_ms() - t0 < 5000);
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.events, 5);
	assert_int_equal(st.lists, 3);
	assert_int_equal(st.reconnects, 0);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.n_log, 5);
	assert_int_equal(f->rec.bad_kind, 0);
	pthread_mutex_unlock(&f->rec.m);
}

#define SI_PATH "/apis/multicluster.x-k8s.io/v1alpha1/serviceimports"
#define SI_OBJ(name)                                                                             \
	"{\"op\":\"apply\",\"object\":{\"apiVersion\":\"multicluster.x-k8s.io/v1alpha1\","       \
	"\"kind\":\"ServiceImport\",\"metadata\":{\"name\":\"" name "\",\"namespace\":\"app\"}," \
	"\"spec\":{\"type\":\"ClusterSetIP\",\"ips\":[\"10.42.0.1\"]}}}"

/*
 * MCS ServiceImports where the CRD may be missing: a 404 is an empty list, reported once (the
 * consumer counts the kind as listed), never an error; the list is tried again every
 * backoff_max_ms and the CRD is picked up when it appears; when it goes again the kind is empty.
 */
static void serviceimports_crd(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;
	int64_t lists;

	control("{\"op\":\"crd\",\"resource\":\"serviceimports\",\"served\":false}");
	f->opts.kinds = ALL_KINDS | 1u << NDC_K8S_SERVICEIMPORTS;
	start(f);
	synced(f, f->opts.kinds, 1);
	usleep(1000 * 1000);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.ends[NDC_K8S_SERVICEIMPORTS], 1); /* once, not per retry */
	assert_int_equal(f->rec.listed[NDC_K8S_SERVICEIMPORTS], 0);
	pthread_mutex_unlock(&f->rec.m);
	/*
	 * retried every backoff_max_ms (200 ms here): slowly, not in a loop; as a list or as a
	 * streamed watch (issue 25), so every request to the path counts
	 */
	lists = server_stat("requests", SI_PATH);
	assert_true(lists >= 3 && lists <= 8);
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.errors, 0);

	/* The CRD appears with an import (made first: the next list sees it), then watched. */
	control(SI_OBJ("db"));
	control("{\"op\":\"crd\",\"resource\":\"serviceimports\",\"served\":true}");
	synced(f, 1u << NDC_K8S_SERVICEIMPORTS, 2);
	assert_true(listed_name(&f->rec, NDC_K8S_SERVICEIMPORTS, "app/db"));
	control(SI_OBJ("web"));
	expect_line(f, "ADDED ServiceImport app/web", 2000);

	/* It goes again: the kind is empty once more (a relist that finds nothing). */
	control("{\"op\":\"crd\",\"resource\":\"serviceimports\",\"served\":false}");
	synced(f, 1u << NDC_K8S_SERVICEIMPORTS, 3);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.listed[NDC_K8S_SERVICEIMPORTS], 0);
	assert_int_equal(f->rec.bad_kind, 0);
	pthread_mutex_unlock(&f->rec.m);
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.errors, 0);
}

/*
 * The kube-dns ConfigMap: one named object in kube-system, listed and watched with a field
 * selector (what RBAC's resourceNames can grant). Other ConfigMaps, in its namespace or with its
 * name elsewhere, are never seen.
 */
static void kube_dns_configmap(void **state)
{
	struct fx *f = *state;

	control("{\"op\":\"apply\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
		"\"kube-dns\",\"namespace\":\"kube-system\"},\"data\":{\"stubDomains\":"
		"\"{}\"}}}");
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
		"\"coredns\",\"namespace\":\"kube-system\"},\"data\":{}}}");
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
		"\"kube-dns\",\"namespace\":\"app\"},\"data\":{}}}");
	f->opts.kinds = 1u << NDC_K8S_CONFIGMAPS;
	start(f);
	synced(f, f->opts.kinds, 1);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.listed[NDC_K8S_CONFIGMAPS], 1);
	pthread_mutex_unlock(&f->rec.m);
	assert_true(listed_name(&f->rec, NDC_K8S_CONFIGMAPS, "kube-system/kube-dns"));
	/* Its state streamed at the start of the watch: one request, no list. */
	assert_int_equal(server_stat("watches", "/api/v1/namespaces/kube-system/configmaps"), 1);
	assert_int_equal(server_stat("lists", "/api/v1/namespaces/kube-system/configmaps"), 0);
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
		"\"coredns\",\"namespace\":\"kube-system\"},\"data\":{\"x\":\"y\"}}}");
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
		"\"kube-dns\",\"namespace\":\"kube-system\"},\"data\":{\"stubDomains\":"
		"\"{\\\"acme.local\\\": [\\\"1.2.3.4\\\"]}\"}}}");
	expect_line(f, "MODIFIED ConfigMap kube-system/kube-dns", 1000);
	control("{\"op\":\"delete\",\"kind\":\"ConfigMap\",\"namespace\":\"kube-system\",\"name\":"
		"\"kube-dns\"}");
	expect_line(f, "DELETED ConfigMap kube-system/kube-dns", 1000);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.n_log, 2); /* coredns was never seen */
	assert_int_equal(f->rec.bad_kind, 0);
	pthread_mutex_unlock(&f->rec.m);
}

/* An event split over many reads (a 200 KB object) after a burst of 50, all in order. */
static void stream_framing(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;
	size_t big = 200 * 1024, len = 0, cap = big + 8192;
	char *body = malloc(cap);

	assert_non_null(body);
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	start(f);
	synced(f, f->opts.kinds, 1);
	len += (size_t)snprintf(body + len, cap - len,
				"{\"op\":\"apply\",\"object\":{\"kind\":\"List\",\"items\":[");
	for (int i = 0; i < 50; i++)
		len += (size_t)snprintf(body + len, cap - len,
					"{\"kind\":\"Service\",\"metadata\":{\"name\":\"burst-%d\","
					"\"namespace\":\"app\"}},",
					i);
	len += (size_t)snprintf(body + len, cap - len,
				"{\"kind\":\"Service\",\"metadata\":{\"name\":\"big\","
				"\"namespace\":\"app\",\"annotations\":{\"a\":\"");
	memset(body + len, 'x', big);
	len += big;
	snprintf(body + len, cap - len, "\"}}}]}}");
	json_object_put(control_req("/control", body));
	free(body);
	expect_line(f, "ADDED Service app/big", 3000);
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.events, 51);
	assert_int_equal(st.errors, 0);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.n_log, 51);
	for (int i = 0; i < 50; i++) {
		char line[64];

		snprintf(line, sizeof(line), "ADDED Service app/burst-%d", i);
		assert_string_equal(f->rec.log[i], line);
	}
	pthread_mutex_unlock(&f->rec.m);
}

/*
 * While the server is paused (a partition: nothing gets through), a change moves it past our
 * resourceVersion and compaction forgets the history: the rewatch gets 410 and must relist.
 */
static void compact_relists(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	relisted_410(f);
	ndc_k8s_watch_stats(f->w, &st);
	assert_true(st.relists_410 >= 1);
	assert_int_equal(st.lists, 2);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.begins[NDC_K8S_SERVICES], 2);
	assert_int_equal(f->rec.listed[NDC_K8S_SERVICES], N_SVC + 1);
	pthread_mutex_unlock(&f->rec.m);
	assert_true(listed_name(&f->rec, NDC_K8S_SERVICES, "app/late"));
	/* And it watches again after the relist. */
	control("{\"op\":\"delete\",\"kind\":\"Service\",\"namespace\":\"app\",\"name\":\"late\"}");
	expect_line(f, "DELETED Service app/late", 1000);
}

/* A dropped stream resumes from the last resourceVersion: nothing missed, no relist. */
static void drop_resumes(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	start(f);
	synced(f, ALL_KINDS, 1);
	server_watchers(3);
	control("{\"op\":\"pause\",\"seconds\":0.5}");
	control("{\"op\":\"drop\"}");
	apply_service("meanwhile");
	expect_line(f, "ADDED Service app/meanwhile", 3000);
	assert_true(WAIT_STAT(&f->rec, f->w, reconnects, 3, 3000));
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.lists, 3);
	assert_int_equal(st.relists_410, 0);
	pthread_mutex_lock(&f->rec.m);
	for (int k = 0; k < NDC_K8S_PODS; k++)
		assert_int_equal(f->rec.begins[k], 1);
	assert_int_equal(f->rec.n_log, 1);
	pthread_mutex_unlock(&f->rec.m);
	/* The new streams carry later changes too. */
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"Namespace\",\"metadata\":{\"name\":"
		"\"after\"}}}");
	expect_line(f, "ADDED Namespace after", 1000);
}

static void token_rotation(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;
	char path[256];

	snprintf(path, sizeof(path), "%s/token", tmpdir);
	write_file(path, TOKEN "\n");
	free(f->conn.token);
	f->conn.token = NULL;
	f->conn.token_file = strdup(path);
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	start(f);
	synced(f, f->opts.kinds, 1);

	/* The server rotates first: the reconnect gets 401, re-reads the file (still old). */
	server_watchers(1);
	control("{\"op\":\"token\",\"token\":\"t0ken-two\"}");
	control("{\"op\":\"drop\"}");
	assert_true(WAIT_STAT(&f->rec, f->w, auth_failures, 1, 3000));
	/* Then the kubelet rewrites the file: the next attempt uses the new token. */
	write_file(path, "t0ken-two");
	apply_service("rotated");
	expect_line(f, "ADDED Service app/rotated", 3000);
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.lists, 1);

	/* File first, then the server: a changed file is picked up before any 401. */
	server_watchers(1);
	write_file(path, "t0ken-three");
	control("{\"op\":\"token\",\"token\":\"t0ken-three\"}");
	control("{\"op\":\"drop\"}");
	apply_service("rotated2");
	expect_line(f, "ADDED Service app/rotated2", 3000);
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.lists, 1);
	assert_int_equal(st.relists_410, 0);
}

static void bad_token(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	free(f->conn.token);
	f->conn.token = strdup("wrong");
	start(f);
	assert_true(WAIT_STAT(&f->rec, f->w, auth_failures, 6, 3000));
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.lists, 0);
	assert_true(st.errors >= 3);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.begins[NDC_K8S_SERVICES], 0);
	pthread_mutex_unlock(&f->rec.m);
	/* The server accepts the token now: the retries succeed. */
	control("{\"op\":\"token\",\"token\":\"wrong\"}");
	synced(f, ALL_KINDS, 1);
}

static void wrong_ca(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	free(f->conn.ca_file);
	if (asprintf(&f->conn.ca_file, "%s/other-ca.pem", certs) < 0)
		fail();
	start(f);
	assert_true(WAIT_STAT(&f->rec, f->w, errors, 6, 3000));
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.lists, 0);
	assert_int_equal(st.auth_failures, 0);
	pthread_mutex_lock(&f->rec.m);
	for (int k = 0; k < NDC_K8S_KINDS; k++)
		assert_int_equal(f->rec.begins[k], 0);
	pthread_mutex_unlock(&f->rec.m);
	/* No request ever reached the HTTP layer. */
	assert_int_equal(server_stat("lists", "/api/v1/services"), 0);
	assert_true(timed_stop(f) < 1000);
}

/* Client certificate and CA given inline (the *-data fields): the blob options. */
static void client_cert_blobs(void **state)
{
	struct fx *f = *state;
	char path[256];

	free(f->conn.token);
	f->conn.token = NULL;
	free(f->conn.ca_file);
	f->conn.ca_file = NULL;
	f->conn.ca_data = read_file(f->ca);
	snprintf(path, sizeof(path), "%s/client.pem", certs);
	f->conn.cert_data = read_file(path);
	snprintf(path, sizeof(path), "%s/client.key", certs);
	f->conn.key_data = read_file(path);
	f->opts.kinds = 1u << NDC_K8S_NAMESPACES;
	start(f);
	synced(f, f->opts.kinds, 1);
	assert_int_equal(server_stat("auth_failures", NULL), 0);
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"Namespace\",\"metadata\":{\"name\":"
		"\"certs\"}}}");
	expect_line(f, "ADDED Namespace certs", 1000);
}

static void client_cert_files(void **state)
{
	struct fx *f = *state;

	free(f->conn.token);
	f->conn.token = NULL;
	if (asprintf(&f->conn.cert_file, "%s/client.pem", certs) < 0 ||
	    asprintf(&f->conn.key_file, "%s/client.key", certs) < 0)
		fail();
	f->opts.kinds = 1u << NDC_K8S_ENDPOINTSLICES;
	start(f);
	synced(f, f->opts.kinds, 1);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.listed[NDC_K8S_ENDPOINTSLICES], N_SLICE);
	pthread_mutex_unlock(&f->rec.m);
}

static void server_errors_retry(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	control("{\"op\":\"fail\",\"count\":3,\"status\":500}");
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	start(f);
	synced(f, f->opts.kinds, 1);
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.errors, 3);
	assert_int_equal(st.lists, 1);
	assert_int_equal(server_stat("injected_failures", NULL), 3);

	/* The same on the watch: 503 twice, then the stream resumes without a relist. */
	server_watchers(1);
	control("{\"op\":\"fail\",\"count\":2,\"status\":503}");
	control("{\"op\":\"drop\"}");
	assert_true(WAIT_STAT(&f->rec, f->w, errors, 5, 3000));
	apply_service("x");
	expect_line(f, "ADDED Service app/x", 3000);
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.lists, 1);
}

/* A 410 on a list page (an expired continue token) starts the list over. */
static void list_410_restarts(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch_stats st;

	control("{\"op\":\"refuse\",\"ways\":[\"stream\",\"cache\"]}");
	control("{\"op\":\"fail\",\"count\":1,\"status\":410,\"path\":\"/api/v1/services\","
		"\"watch\":false}");
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	f->opts.page_size = 2;
	start(f);
	synced(f, f->opts.kinds, 1);
	ndc_k8s_watch_stats(f->w, &st);
	assert_int_equal(st.relists_410, 1);
	assert_int_equal(st.lists, 1);
	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.listed[NDC_K8S_SERVICES], N_SVC);
	pthread_mutex_unlock(&f->rec.m);
}

/* ---- a scripted plain-HTTP server: exact control over how the stream is cut -------------------
 */

struct script {
	int lfd, port;
	pthread_t tid;
	atomic_bool stop;
	pthread_mutex_t m;
	unsigned lists, watches;
	char watch_rv[4][32]; /* resourceVersion= of each watch request */
};

static bool send_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static bool send_chunk(int fd, const char *data)
{
	char hdr[32];

	snprintf(hdr, sizeof(hdr), "%zx\r\n", strlen(data));
	return send_all(fd, hdr, strlen(hdr)) && send_all(fd, data, strlen(data)) &&
	       send_all(fd, "\r\n", 2);
}

/* Reads one request head; false when the peer closed or stop was set. */
static bool read_head(struct script *sc, int fd, char *buf, size_t len)
{
	size_t have = 0;

	while (!strstr(buf, "\r\n\r\n")) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (atomic_load(&sc->stop) || have + 1 >= len)
			return false;
		if (poll(&pfd, 1, 50) != 1)
			continue;
		n = recv(fd, buf + have, len - 1 - have, 0);
		if (n <= 0)
			return false;
		have += (size_t)n;
		buf[have] = '\0';
	}
	return true;
}

static const char script_list[] =
    "{\"kind\":\"ServiceList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"10\"},"
    "\"items\":[{\"metadata\":{\"name\":\"s\",\"namespace\":\"n\",\"resourceVersion\":\"5\"}}]}";

/* One complete event and half of the next in the first chunk, the rest after a pause. */
static const char *const script_stream1[] = {
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
    "\"resourceVersion\":\"11\"}}}\n{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\"",
    ":\"s\",\"namespace\":\"n\",\"resourceVersion\":\"12\"}}}\n{\"type\":\"BOOKMARK\",\"object\""
    ":{\"kind\":\"Service\",\"metadata\":{\"resourceVersion\":\"20\"}}}\n{\"type\":\"DELETED\","
    "\"object\":{\"kind\":\"Service\",\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
    "\"resourceVersion\":\"21\"}}}\n{\"type\":\"BOOKMARK\",",
    "\"object\":{\"metadata\":{\"resourceVersion\":\"30\"}}}\n",
    NULL,
};

static const char stream_head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				  "Transfer-Encoding: chunked\r\n\r\n";

static void serve_conn(struct script *sc, int fd)
{
	char req[4096];

	for (;;) {
		const char *rv;
		unsigned nw;

		memset(req, 0, sizeof(req));
		if (!read_head(sc, fd, req, sizeof(req)))
			return;
		if (strstr(req, "sendInitialEvents=true")) {
			/* A server without WatchList: the client lists instead. */
			static const char refused[] = "HTTP/1.1 422 Unprocessable "
						      "Entity\r\nContent-Type: application/json\r\n"
						      "Content-Length: 2\r\n\r\n{}";

			if (!send_all(fd, refused, strlen(refused)))
				return;
			continue;
		}
		if (!strstr(req, "watch=true")) {
			char hdr[256];

			pthread_mutex_lock(&sc->m);
			sc->lists++;
			pthread_mutex_unlock(&sc->m);
			snprintf(hdr, sizeof(hdr),
				 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				 "Content-Length: %zu\r\n\r\n",
				 strlen(script_list));
			if (!send_all(fd, hdr, strlen(hdr)) ||
			    !send_all(fd, script_list, strlen(script_list)))
				return;
			continue;
		}
		pthread_mutex_lock(&sc->m);
		nw = sc->watches++;
		rv = strstr(req, "resourceVersion=");
		if (rv && nw < 4)
			sscanf(rv, "resourceVersion=%31[0-9]", sc->watch_rv[nw]);
		pthread_mutex_unlock(&sc->m);
		if (!send_all(fd, stream_head, strlen(stream_head)))
			return;
		if (nw == 0) {
			for (int i = 0; script_stream1[i]; i++) {
				usleep(50 * 1000);
				if (!send_chunk(fd, script_stream1[i]))
					return;
			}
		} else if (nw == 1) {
			/* Compacted meanwhile: the 410 comes as an ERROR event in a 200 stream. */
			if (!send_chunk(fd,
					"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
					"\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":"
					"\"Expired\",\"code\":410}}\n"))
				return;
		} else {
			/* Open and idle until the client goes away. */
			while (!atomic_load(&sc->stop)) {
				struct pollfd pfd = {.fd = fd, .events = POLLIN};

				if (poll(&pfd, 1, 50) == 1)
					return;
			}
			return;
		}
		if (!send_all(fd, "0\r\n\r\n", 5))
			return;
	}
}

static void *script_main(void *arg)
{
	struct script *sc = arg;

	while (!atomic_load(&sc->stop)) {
		struct pollfd pfd = {.fd = sc->lfd, .events = POLLIN};
		int fd;

		if (poll(&pfd, 1, 50) != 1)
			continue;
		fd = accept(sc->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		serve_conn(sc, fd);
		close(fd);
	}
	return NULL;
}

static bool script_watches(struct rec *r, const void *arg)
{
	struct script *sc = (struct script *)arg;
	unsigned n;

	(void)r;
	pthread_mutex_lock(&sc->m);
	n = sc->watches;
	pthread_mutex_unlock(&sc->m);
	return n >= 3;
}

static void scripted_stream(void **state)
{
	struct fx *f = *state;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t salen = sizeof(sa);
	struct ndc_k8s_watch_stats st;
	struct script sc = {0};
	char *server;

	kill_server(); /* this one needs no fake API server */
	pthread_mutex_init(&sc.m, NULL);
	sc.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(sc.lfd >= 0);
	assert_int_equal(bind(sc.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(sc.lfd, 8), 0);
	assert_int_equal(getsockname(sc.lfd, (struct sockaddr *)&sa, &salen), 0);
	assert_int_equal(pthread_create(&sc.tid, NULL, script_main, &sc), 0);
	assert_true(asprintf(&server, "http://127.0.0.1:%u", ntohs(sa.sin_port)) > 0);
	free(f->conn.server);
	f->conn.server = server;
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	start(f);
	expect_line(f, "DELETED Service n/a", 3000);
	assert_true(wait_for(&f->rec, script_watches, &sc, 3000));
	synced(f, f->opts.kinds, 2);
	ndc_k8s_watch_stop(f->w);
	f->w = NULL;
	atomic_store(&sc.stop, true);
	pthread_join(sc.tid, NULL);
	close(sc.lfd);

	pthread_mutex_lock(&f->rec.m);
	assert_int_equal(f->rec.n_log, 3);
	assert_string_equal(f->rec.log[0], "ADDED Service n/a");
	assert_string_equal(f->rec.log[1], "MODIFIED Service n/s");
	assert_string_equal(f->rec.log[2], "DELETED Service n/a");
	assert_int_equal(f->rec.bad_kind, 0);
	assert_int_equal(f->rec.listed[NDC_K8S_SERVICES], 1);
	pthread_mutex_unlock(&f->rec.m);
	/* Watch from the list's rv, then from the last bookmark, then (after 410) a new list's. */
	assert_string_equal(sc.watch_rv[0], "10");
	assert_string_equal(sc.watch_rv[1], "30");
	assert_string_equal(sc.watch_rv[2], "10");
	assert_int_equal(sc.lists, 2);
	ndc_k8s_watch_stats(NULL, &st);
	assert_int_equal(st.events, 0);
	pthread_mutex_destroy(&sc.m);
}

static void stop_is_prompt(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_conn good;

	/* Mid-stream: all watches open and idle between bookmarks. */
	start(f);
	synced(f, ALL_KINDS, 1);
	assert_true(timed_stop(f) < 1000);

	/* In a request the server holds (paused). */
	control("{\"op\":\"pause\",\"seconds\":10}");
	start(f);
	usleep(300 * 1000);
	assert_true(timed_stop(f) < 1000);
	control("{\"op\":\"pause\",\"seconds\":0}");

	/* In a long backoff sleep after a failure. */
	good = f->conn;
	f->conn.ca_file = NULL;
	if (asprintf(&f->conn.ca_file, "%s/other-ca.pem", certs) < 0)
		fail();
	f->opts.backoff_min_ms = f->opts.backoff_max_ms = 20000;
	start(f);
	assert_true(WAIT_STAT(&f->rec, f->w, errors, 3, 3000));
	assert_true(timed_stop(f) < 1000);
	free(f->conn.ca_file);
	f->conn = good;

	ndc_k8s_watch_stop(NULL);
}

static void bad_args(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_watch *w = (void *)1;
	struct ndc_k8s_watch_opts o = f->opts;

	o.kinds = 0;
	assert_int_equal(ndc_k8s_watch_start(&f->conn, &o, &rec_ops, NULL, &w), -EINVAL);
	assert_null(w);
	o.kinds = 1u << NDC_K8S_KINDS;
	assert_int_equal(ndc_k8s_watch_start(&f->conn, &o, &rec_ops, NULL, &w), -EINVAL);
}

/* ---- list pages through the list parser, without a server ----------------------------------- */
struct page_count {
	unsigned begins, items, ends;
	char last[64];
};

static void pc_begin(void *arg, enum ndc_k8s_kind kind)
{
	(void)kind;
	((struct page_count *)arg)->begins++;
}

static void pc_item(void *arg, enum ndc_k8s_kind kind, struct json_object *obj)
{
	struct page_count *c = arg;
	struct json_object *md, *name;

	(void)kind;
	c->items++;
	if (json_object_object_get_ex(obj, "metadata", &md) &&
	    json_object_object_get_ex(md, "name", &name))
		snprintf(c->last, sizeof(c->last), "%s", json_object_get_string(name));
}

static void pc_end(void *arg, enum ndc_k8s_kind kind)
{
	(void)kind;
	((struct page_count *)arg)->ends++;
}

static int replay_page(const char *page, size_t chunk, struct page_count *c)
{
	static const struct ndc_k8s_watch_ops ops = {
	    .list_begin = pc_begin, .list_item = pc_item, .list_end = pc_end};

	memset(c, 0, sizeof(*c));
	return ndc_k8s_list_replay(NDC_K8S_SERVICES, page, strlen(page), chunk, &ops, c);
}

/*
 * Items are cut out of the page as the bytes arrive, whatever the chunking, strings with braces,
 * brackets and escaped quotes included; anything but objects separated by single commas is not a
 * List, and neither is a page without its skeleton.
 */
static void list_page_replay(void **state)
{
	static const char good[] =
	    "{\"kind\":\"ServiceList\",\"metadata\":{\"resourceVersion\":\"9\","
	    "\"continue\":\"x{[\"},\"items\" : [ {\"metadata\":{\"name\":\"a}\\\"]\"}} ,\n"
	    "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"x\":[{},[]]}} ]}";
	static const char *const bad[] = {
	    "{\"metadata\":{},\"items\":[{\"a\":1},,{\"b\":2}]}",
	    "{\"metadata\":{},\"items\":[{\"a\":1},]}",
	    "{\"metadata\":{},\"items\":[1,2]}",
	    "{\"metadata\":{},\"items\":[{\"a\":1}]",
	    "{\"items\":[{\"a\":1}]}",
	    "{\"metadata\":{},\"items\":[{\"a\":}]}",
	    "[]",
	};
	struct page_count c;

	(void)state;
	for (size_t chunk = 1; chunk <= sizeof(good); chunk += chunk < 8 ? 1 : 37) {
		assert_int_equal(replay_page(good, chunk, &c), 0);
		assert_int_equal(c.begins, 1);
		assert_int_equal(c.items, 2);
		assert_int_equal(c.ends, 1);
		assert_string_equal(c.last, "b");
	}
	assert_int_equal(replay_page("{\"metadata\":{},\"items\":[]}", 3, &c), 0);
	assert_int_equal(c.items, 0);
	assert_int_equal(c.ends, 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(replay_page(bad[i], 5, &c), -EBADMSG);
		assert_int_equal(c.ends, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(first_sync, setup, teardown),
	    cmocka_unit_test_setup_teardown(pagination, setup, teardown),
	    cmocka_unit_test_setup_teardown(events, setup, teardown),
	    cmocka_unit_test_setup_teardown(kube_dns_configmap, setup, teardown),
	    cmocka_unit_test_setup_teardown(serviceimports_crd, setup, teardown),
	    cmocka_unit_test_setup_teardown(stream_framing, setup, teardown),
	    cmocka_unit_test_setup_teardown(compact_relists, setup, teardown),
	    cmocka_unit_test_setup_teardown(drop_resumes, setup, teardown),
	    cmocka_unit_test_setup_teardown(token_rotation, setup, teardown),
	    cmocka_unit_test_setup_teardown(bad_token, setup, teardown),
	    cmocka_unit_test_setup_teardown(wrong_ca, setup, teardown),
	    cmocka_unit_test_setup_teardown(client_cert_blobs, setup, teardown),
	    cmocka_unit_test_setup_teardown(client_cert_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(server_errors_retry, setup, teardown),
	    cmocka_unit_test_setup_teardown(list_410_restarts, setup, teardown),
	    cmocka_unit_test_setup_teardown(scripted_stream, setup, teardown),
	    cmocka_unit_test_setup_teardown(stop_is_prompt, setup, teardown),
	    cmocka_unit_test_setup_teardown(bad_args, setup, teardown),
	    cmocka_unit_test(list_page_replay),
	};
	int r = fx_init("ndc-k8s-watch");

	if (r)
		return r;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
