// SPDX-License-Identifier: MIT
/* The shared fixture of the Kubernetes client's tests: see fixture.h. */
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include <ndc/log.h>

#include "fixture.h"

const char *const kind_names[NDC_K8S_KINDS] = {
    "Namespace", "Service", "EndpointSlice", "Pod", "ServiceImport", "ConfigMap", "Pod"};

char tmpdir[64];
char certs[128];
const char *fakeapi;
pid_t server_pid;
int api_port, ctl_port;

/* ---- fake server ------------------------------------------------------------------------------
 */

void kill_server(void)
{
	if (server_pid > 0) {
		kill(server_pid, SIGKILL);
		waitpid(server_pid, NULL, 0);
		server_pid = 0;
	}
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

void cleanup_all(void)
{
	kill_server();
	if (tmpdir[0])
		nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

void write_file(const char *path, const char *text)
{
	char tmp[256];
	FILE *f;

	/* Replace atomically (a new inode), as the kubelet does with projected tokens. */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(tmp, path), 0);
}

char *read_file(const char *path)
{
	char *p = NULL;
	size_t len = 0;
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	assert_int_equal(getdelim(&p, &len, '\0', f) > 0, 1);
	fclose(f);
	return p;
}

void write_objects(const char *path)
{
	json_object *list = json_object_new_object(), *items = json_object_new_array();
	char name[64];

	json_object_object_add(list, "kind", json_object_new_string("List"));
	json_object_object_add(list, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(list, "items", items);
	for (int i = 0; i < N_NS; i++) {
		static const char *const ns[] = {"default", "kube-system", "app"};
		json_object *o = json_object_new_object(), *md = json_object_new_object();

		json_object_object_add(o, "kind", json_object_new_string("Namespace"));
		json_object_object_add(md, "name", json_object_new_string(ns[i]));
		json_object_object_add(o, "metadata", md);
		json_object_array_add(items, o);
	}
	for (int i = 0; i < N_SVC; i++) {
		json_object *o = json_object_new_object(), *md = json_object_new_object();

		snprintf(name, sizeof(name), "svc-%d", i);
		json_object_object_add(o, "kind", json_object_new_string("Service"));
		json_object_object_add(md, "name", json_object_new_string(name));
		json_object_object_add(md, "namespace", json_object_new_string("app"));
		json_object_object_add(o, "metadata", md);
		json_object_object_add(o, "spec",
				       json_tokener_parse("{\"clusterIP\":\"10.96.0.10\",\"ports\":"
							  "[{\"name\":\"dns\",\"port\":53}]}"));
		json_object_array_add(items, o);
	}
	for (int i = 0; i < N_SLICE; i++) {
		json_object *o = json_object_new_object(), *md = json_object_new_object();

		snprintf(name, sizeof(name), "svc-%d-abcde", i);
		json_object_object_add(o, "kind", json_object_new_string("EndpointSlice"));
		json_object_object_add(md, "name", json_object_new_string(name));
		json_object_object_add(md, "namespace", json_object_new_string("app"));
		snprintf(name, sizeof(name), "{\"kubernetes.io/service-name\":\"svc-%d\"}", i);
		json_object_object_add(md, "labels", json_tokener_parse(name));
		json_object_object_add(o, "metadata", md);
		json_object_object_add(o, "addressType", json_object_new_string("IPv4"));
		json_object_object_add(o, "endpoints",
				       json_tokener_parse("[{\"addresses\":[\"10.0.0.1\"]}]"));
		json_object_array_add(items, o);
	}
	assert_int_equal(json_object_to_file(path, list), 0);
	json_object_put(list);
}

void start_server(void)
{
	char objects[256], cert[256], key[256], ca[256], line[256] = "";
	struct pollfd pfd;
	size_t len = 0;
	int pipefd[2];

	snprintf(objects, sizeof(objects), "%s/objects.json", tmpdir);
	snprintf(cert, sizeof(cert), "%s/server.pem", certs);
	snprintf(key, sizeof(key), "%s/server.key", certs);
	snprintf(ca, sizeof(ca), "%s/ca.pem", certs);
	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	server_pid = fork();
	assert_true(server_pid >= 0);
	if (server_pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		execlp("python3", "python3", fakeapi, "--cert", cert, "--key", key, "--client-ca",
		       ca, "--token", TOKEN, "--objects", objects, "--bookmark-interval", "0.5",
		       (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	pfd = (struct pollfd){.fd = pipefd[0], .events = POLLIN};
	while (!strchr(line, '\n') && len < sizeof(line) - 1) {
		ssize_t n;

		if (poll(&pfd, 1, 15000) != 1)
			break;
		n = read(pipefd[0], line + len, sizeof(line) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		line[len] = '\0';
	}
	close(pipefd[0]);
	if (sscanf(line, "fakeapi listening api=%d control=%d", &api_port, &ctl_port) != 2)
		fail_msg("fake API server did not start: '%s'", line);
}

static size_t sink(char *d, size_t s, size_t n, void *arg)
{
	char **out = arg;
	size_t old = *out ? strlen(*out) : 0;
	char *p = realloc(*out, old + s * n + 1);

	if (!p)
		return 0;
	memcpy(p + old, d, s * n);
	p[old + s * n] = '\0';
	*out = p;
	return s * n;
}

/* POST (body) or GET (NULL) on the control port; returns the response JSON. */
json_object *control_req(const char *path, const char *body)
{
	char url[128], *resp = NULL;
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	CURL *e = curl_easy_init();
	json_object *o;
	long status = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", ctl_port, path);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &resp);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
	if (body)
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	assert_int_equal(curl_easy_perform(e), CURLE_OK);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(e);
	curl_slist_free_all(h);
	if (status != 200)
		fail_msg("control %s %s: HTTP %ld %s", path, body ? body : "", status,
			 resp ? resp : "");
	o = json_tokener_parse(resp);
	free(resp);
	assert_non_null(o);
	return o;
}

void __attribute__((format(printf, 1, 2))) control(const char *fmt, ...)
{
	char body[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	json_object_put(control_req("/control", body));
}

int64_t server_stat(const char *table, const char *key)
{
	json_object *o = control_req("/stats", NULL), *v;
	int64_t n = 0;

	if (json_object_object_get_ex(o, table, &v)) {
		if (!key)
			n = json_object_get_int64(v);
		else if (json_object_object_get_ex(v, key, &v))
			n = json_object_get_int64(v);
	}
	json_object_put(o);
	return n;
}

/* ---- what the watcher reported ----------------------------------------------------------------
 */

const char *obj_name(json_object *o, char *buf, size_t len)
{
	json_object *md, *ns = NULL, *name = NULL;

	json_object_object_get_ex(o, "metadata", &md);
	json_object_object_get_ex(md, "namespace", &ns);
	json_object_object_get_ex(md, "name", &name);
	if (ns)
		snprintf(buf, len, "%s/%s", json_object_get_string(ns),
			 json_object_get_string(name));
	else
		snprintf(buf, len, "%s", json_object_get_string(name));
	return buf;
}

void check_kind(struct rec *r, enum ndc_k8s_kind k, json_object *o)
{
	json_object *v;

	if (!json_object_object_get_ex(o, "kind", &v) ||
	    strcmp(json_object_get_string(v), kind_names[k]))
		r->bad_kind++;
}

void on_begin(void *arg, enum ndc_k8s_kind k)
{
	struct rec *r = arg;

	pthread_mutex_lock(&r->m);
	r->begins[k]++;
	r->items[k] = 0;
	for (int i = 0; i < MAX_NAMES; i++) {
		free(r->names[k][i]);
		r->names[k][i] = NULL;
	}
	pthread_mutex_unlock(&r->m);
}

void on_item(void *arg, enum ndc_k8s_kind k, json_object *o)
{
	struct rec *r = arg;
	char name[128];

	pthread_mutex_lock(&r->m);
	check_kind(r, k, o);
	if (r->items[k] < MAX_NAMES)
		r->names[k][r->items[k]] = strdup(obj_name(o, name, sizeof(name)));
	r->items[k]++;
	pthread_mutex_unlock(&r->m);
}

void on_end(void *arg, enum ndc_k8s_kind k)
{
	struct rec *r = arg;

	pthread_mutex_lock(&r->m);
	r->ends[k]++;
	r->listed[k] = r->items[k];
	pthread_cond_broadcast(&r->c);
	pthread_mutex_unlock(&r->m);
}

void on_event(void *arg, enum ndc_k8s_kind k, enum ndc_k8s_event ev, json_object *o)
{
	static const char *const evs[] = {"ADDED", "MODIFIED", "DELETED"};
	struct rec *r = arg;
	char name[128], line[256];

	snprintf(line, sizeof(line), "%s %s %s", evs[ev], kind_names[k],
		 obj_name(o, name, sizeof(name)));
	pthread_mutex_lock(&r->m);
	check_kind(r, k, o);
	if (r->n_log < MAX_LOG)
		r->log[r->n_log++] = strdup(line);
	pthread_cond_broadcast(&r->c);
	pthread_mutex_unlock(&r->m);
}

const struct ndc_k8s_watch_ops rec_ops = {
    .list_begin = on_begin,
    .list_item = on_item,
    .list_end = on_end,
    .event = on_event,
};

int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until pred holds (checked under the recorder's lock); false on timeout. */
bool wait_for(struct rec *r, bool (*pred)(struct rec *, const void *), const void *arg,
	      int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	bool ok;

	pthread_mutex_lock(&r->m);
	while (!(ok = pred(r, arg))) {
		int64_t left = end - now_ms();
		struct timespec ts;

		if (left <= 0)
			break;
		if (left > 50)
			left = 50; /* also re-check conditions nobody signals (stats) */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)left * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&r->c, &r->m, &ts);
	}
	pthread_mutex_unlock(&r->m);
	return ok;
}

bool has_line(struct rec *r, const void *arg)
{
	for (size_t i = 0; i < r->n_log; i++)
		if (!strcmp(r->log[i], arg))
			return true;
	return false;
}

bool ends_reached(struct rec *r, const void *arg)
{
	const struct ends_at_least *e = arg;

	for (int k = 0; k < NDC_K8S_KINDS; k++)
		if ((e->kinds & 1u << k) && r->ends[k] < e->n)
			return false;
	return true;
}

bool listed_name(struct rec *r, enum ndc_k8s_kind k, const char *name)
{
	bool found = false;

	pthread_mutex_lock(&r->m);
	for (int i = 0; i < MAX_NAMES && !found; i++)
		found = r->names[k][i] && !strcmp(r->names[k][i], name);
	pthread_mutex_unlock(&r->m);
	return found;
}

bool stat_reached(struct rec *r, const void *arg)
{
	const struct stat_at_least *s = arg;
	struct ndc_k8s_watch_stats st;
	uint64_t v;

	(void)r;
	ndc_k8s_watch_stats(s->w, &st);
	memcpy(&v, (const char *)&st + s->off, sizeof(v));
	return v >= s->n;
}

/* A drop only cuts the streams the server has open: wait until every watch is in place. */
void server_watchers(int n)
{
	int64_t end = now_ms() + 5000;

	while (server_stat("watchers", NULL) != n) {
		if (now_ms() > end)
			fail_msg("the server never had %d watch streams open", n);
		usleep(20 * 1000);
	}
}

void apply_service(const char *name)
{
	control("{\"op\":\"apply\",\"object\":{\"kind\":\"Service\",\"metadata\":{\"name\":\"%s\","
		"\"namespace\":\"app\"}}}",
		name);
}

void compact_past(int watchers, const char *name)
{
	server_watchers(watchers);
	control("{\"op\":\"pause\",\"seconds\":0.5}");
	apply_service(name);
	control("{\"op\":\"compact\"}");
}

/* ---- fixture ----------------------------------------------------------------------------------
 */

int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	pthread_mutex_init(&f->rec.m, NULL);
	pthread_cond_init(&f->rec.c, NULL);
	start_server();
	snprintf(f->ca, sizeof(f->ca), "%s/ca.pem", certs);
	if (asprintf(&f->conn.server, "https://127.0.0.1:%d", api_port) < 0)
		return -1;
	f->conn.ca_file = strdup(f->ca);
	f->conn.token = strdup(TOKEN);
	f->opts = (struct ndc_k8s_watch_opts){.kinds = ALL_KINDS,
					      .page_size = 500,
					      .timeout_s = 30,
					      .backoff_min_ms = 20,
					      .backoff_max_ms = 200};
	*state = f;
	return 0;
}

int teardown(void **state)
{
	struct fx *f = *state;

	ndc_k8s_watch_stop(f->w);
	kill_server();
	ndc_k8s_conn_free(&f->conn);
	for (int k = 0; k < NDC_K8S_KINDS; k++)
		for (int i = 0; i < MAX_NAMES; i++)
			free(f->rec.names[k][i]);
	for (size_t i = 0; i < f->rec.n_log; i++)
		free(f->rec.log[i]);
	pthread_cond_destroy(&f->rec.c);
	pthread_mutex_destroy(&f->rec.m);
	free(f);
	return 0;
}

void start(struct fx *f)
{
	assert_int_equal(ndc_k8s_watch_start(&f->conn, &f->opts, &rec_ops, &f->rec, &f->w), 0);
	assert_non_null(f->w);
}

void synced(struct fx *f, uint32_t kinds, unsigned n)
{
	struct ends_at_least e = {kinds, n};

	if (!wait_for(&f->rec, ends_reached, &e, 5000))
		fail_msg("no complete list #%u within 5 s", n);
}

void relisted_410(struct fx *f)
{
	f->opts.kinds = 1u << NDC_K8S_SERVICES;
	start(f);
	synced(f, f->opts.kinds, 1);
	compact_past(1, "late");
	control("{\"op\":\"drop\"}");
	synced(f, f->opts.kinds, 2);
}

void expect_line(struct fx *f, const char *line, int ms)
{
	if (!wait_for(&f->rec, has_line, line, ms))
		fail_msg("'%s' did not arrive within %d ms", line, ms);
}

int64_t timed_stop(struct fx *f)
{
	int64_t t0 = now_ms();

	ndc_k8s_watch_stop(f->w);
	f->w = NULL;
	return now_ms() - t0;
}

int fx_init(const char *name)
{
	char cmd[512], objects[256];
	const char *slash;

	fakeapi = getenv("NDC_FAKEAPI");
	if (!fakeapi || !*fakeapi) {
		printf("skip: NDC_FAKEAPI (path of fake_apiserver.py) is not set\n");
		return 77;
	}
	if (system("python3 -c 'import ssl' >/dev/null 2>&1") != 0 ||
	    system("openssl version >/dev/null 2>&1") != 0) {
		printf("skip: needs python3 (with ssl) and openssl\n");
		return 77;
	}
	/* NDC_TEST_VERBOSE=1: the client's info log, 2: debug too. */
	ndc_log_level = getenv("NDC_TEST_VERBOSE")
			    ? NDC_LOG_INFO + atoi(getenv("NDC_TEST_VERBOSE")) - 1
			    : NDC_LOG_ERR;
	/* The watcher must not need SIGPIPE ignored by its host; the test does not either. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/%s-XXXXXX", name);
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	atexit(cleanup_all);
	snprintf(certs, sizeof(certs), "%s/certs", tmpdir);
	slash = strrchr(fakeapi, '/');
	snprintf(cmd, sizeof(cmd), "bash '%.*s/make_certs.sh' '%s' >/dev/null",
		 slash ? (int)(slash - fakeapi) : 1, slash ? fakeapi : ".", certs);
	if (system(cmd) != 0) {
		fprintf(stderr, "make_certs.sh failed: %s\n", cmd);
		return 1;
	}
	snprintf(objects, sizeof(objects), "%s/objects.json", tmpdir);
	write_objects(objects);
	return 0;
}
