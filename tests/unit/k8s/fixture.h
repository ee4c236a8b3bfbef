/* SPDX-License-Identifier: MIT */
/*
 * What the Kubernetes client's tests share: tests/fakeapi/fake_apiserver.py started fresh per
 * test over HTTPS on 127.0.0.1 with certificates from make_certs.sh, its control port (changes,
 * faults, counters), a recorder of what the watcher reports, and the fixture around them.
 */
#ifndef NDC_TEST_K8S_FIXTURE_H
#define NDC_TEST_K8S_FIXTURE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "k8s/k8s.h"

#define TOKEN "t0ken-one"
#define N_NS 3
#define N_SVC 5
#define N_SLICE 3
#define MAX_LOG 1024
#define MAX_NAMES 64
#define ALL_KINDS (1u << NDC_K8S_NAMESPACES | 1u << NDC_K8S_SERVICES | 1u << NDC_K8S_ENDPOINTSLICES)

extern const char *const kind_names[NDC_K8S_KINDS];
extern char tmpdir[64];
extern char certs[128];
extern const char *fakeapi;
extern pid_t server_pid;
extern int api_port, ctl_port;
/* Records into the struct rec given as the watch's arg. */
extern const struct ndc_k8s_watch_ops rec_ops;

struct rec {
	pthread_mutex_t m;
	pthread_cond_t c;
	unsigned begins[NDC_K8S_KINDS], ends[NDC_K8S_KINDS];
	unsigned items[NDC_K8S_KINDS];	/* in the list being received */
	unsigned listed[NDC_K8S_KINDS]; /* in the last complete list */
	char *names[NDC_K8S_KINDS][MAX_NAMES];
	unsigned bad_kind; /* objects whose kind field was not the watched kind */
	size_t n_log;
	char *log[MAX_LOG]; /* "ADDED Service app/x" */
};

struct ends_at_least {
	uint32_t kinds;
	unsigned n;
};

struct stat_at_least {
	struct ndc_k8s_watch *w;
	size_t off; /* offsetof(struct ndc_k8s_watch_stats, x) */
	uint64_t n;
};

#define WAIT_STAT(r, w, field, n, ms) \
	wait_for(r, stat_reached,     \
		 &(struct stat_at_least){w, offsetof(struct ndc_k8s_watch_stats, field), n}, ms)

struct fx {
	struct rec rec;
	struct ndc_k8s_conn conn;
	struct ndc_k8s_watch_opts opts;
	struct ndc_k8s_watch *w;
	char ca[256];
};

void kill_server(void);
void cleanup_all(void);
void write_file(const char *path, const char *text);
char *read_file(const char *path);
void write_objects(const char *path);
void start_server(void);
json_object *control_req(const char *path, const char *body);
void __attribute__((format(printf, 1, 2))) control(const char *fmt, ...);
int64_t server_stat(const char *table, const char *key);
const char *obj_name(json_object *o, char *buf, size_t len);
void check_kind(struct rec *r, enum ndc_k8s_kind k, json_object *o);
void on_begin(void *arg, enum ndc_k8s_kind k);
void on_item(void *arg, enum ndc_k8s_kind k, json_object *o);
void on_end(void *arg, enum ndc_k8s_kind k);
void on_event(void *arg, enum ndc_k8s_kind k, enum ndc_k8s_event ev, json_object *o);
int64_t now_ms(void);
bool wait_for(struct rec *r, bool (*pred)(struct rec *, const void *), const void *arg,
	      int timeout_ms);
bool has_line(struct rec *r, const void *arg);
bool ends_reached(struct rec *r, const void *arg);
bool listed_name(struct rec *r, enum ndc_k8s_kind k, const char *name);
bool stat_reached(struct rec *r, const void *arg);
void server_watchers(int n);
/* A Service name (no spec) added in namespace app. */
void apply_service(const char *name);
/*
 * A partition that makes the client relist: once that many watch streams are open, the server is
 * paused (nothing gets through), the Service name added moves it past the client's
 * resourceVersion, and compaction forgets the history: the caller drops the streams (after any
 * fault it injects) and the rewatch gets 410.
 */
void compact_past(int watchers, const char *name);
/* Services alone watched, synced, then compact_past(1, "late") and the drop: synced again. */
void relisted_410(struct fx *f);
int setup(void **state);
int teardown(void **state);
void start(struct fx *f);
void synced(struct fx *f, uint32_t kinds, unsigned n);
void expect_line(struct fx *f, const char *line, int ms);
int64_t timed_stop(struct fx *f);

/*
 * The process's setup, before cmocka runs the tests: NDC_FAKEAPI, python3 and openssl (77 when
 * missing: skipped), the log level (NDC_TEST_VERBOSE), a temporary directory named after name
 * (removed at exit with the server), certificates and the objects file. 0, 77 or 1.
 */
int fx_init(const char *name);

#endif
