// SPDX-License-Identifier: MIT
/*
 * Reload's decisions: what a new config file changes (ndc_reload_diff: live keys against what is
 * in effect, restart keys against what the agent started with), and what a file that cannot be
 * applied leaves in effect (ndc_reload_file on a reload made by hand, with a real cache and
 * forwarder and a record-table rebuild that the test makes succeed or fail).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reload/internal.h"

static void cfg_of(const char *yaml, struct ndc_config *cfg)
{
	char err[512] = "";
	int r = ndc_config_parse(yaml, strlen(yaml), cfg, err, sizeof(err));

	if (r)
		print_error("input:\n%s\nerror: %s\n", yaml, err);
	assert_int_equal(r, 0);
}

/* The diff of next against one configuration both in effect and running. */
static void diff_of(const char *before, const char *after, bool fastpath, struct reload_diff *d)
{
	struct ndc_config a, b;

	cfg_of(before, &a);
	cfg_of(after, &b);
	ndc_reload_diff(&b, &a, &a, fastpath, d);
	ndc_config_free(&a);
	ndc_config_free(&b);
}

static void assert_no_live(const struct reload_diff *d)
{
	assert_string_equal(d->records, "");
	assert_false(d->upstream || d->stub_domains || d->forward || d->cache || d->prefetch ||
		     d->per_client || d->log_level || d->log_queries);
}

static void test_diff_same(void **state)
{
	static const char yaml[] = "upstream: [169.254.1.1, 169.254.1.2]\n"
				   "stub_domains: {corp.test: 169.254.9.9}\n"
				   "records: {ttl: 30, namespaces: [a, b]}\n"
				   "dataplane: {interfaces: [eth0]}\n";
	struct reload_diff d;

	(void)state;
	diff_of(yaml, yaml, true, &d);
	assert_string_equal(d.restart, "");
	assert_false(d.pods_kept);
	assert_no_live(&d);
	/* Defaults against defaults, and a file that only spells the defaults out. */
	diff_of("", "port: 53\nrecords: {ttl: 5}\ncache: {prefetch: true}\n", false, &d);
	assert_string_equal(d.restart, "");
	assert_no_live(&d);
}

static void test_diff_live_keys(void **state)
{
	struct reload_diff d;

	(void)state;
	diff_of("", "records: {ttl: 30, namespaces: [a], multicluster_zones: [clusterset.local]}\n",
		false, &d);
	assert_string_equal(d.records,
			    "records.ttl, records.namespaces, records.multicluster_zones");
	assert_string_equal(d.restart, "");

	diff_of("upstream: 169.254.1.1\n", "upstream: 169.254.1.1:5353\n", false, &d);
	assert_true(d.upstream);
	assert_false(d.stub_domains || d.forward || d.cache);
	diff_of("stub_domains: {a.test: 169.254.9.9}\n", "stub_domains: {a.test: 169.254.9.8}\n",
		false, &d);
	assert_true(d.stub_domains);
	assert_false(d.upstream);
	diff_of("", "forward: {timeout_ms: 2000}\n", false, &d);
	assert_true(d.forward);
	diff_of("", "forward: {policy: random}\n", false, &d);
	assert_true(d.forward);
	assert_false(d.per_client);

	diff_of("", "cache: {max_ttl: 60}\n", false, &d);
	assert_true(d.cache);
	assert_false(d.prefetch);
	diff_of("", "cache: {prefetch: false}\n", false, &d);
	assert_true(d.prefetch);
	assert_false(d.cache);
	diff_of("", "forward: {per_client: {burst: 5}}\n", false, &d);
	assert_true(d.per_client);
	assert_false(d.forward);
	/* With the limiter off its burst means nothing. */
	diff_of("forward: {per_client: false}\n", "forward: {per_client: {burst: 5}}\n", false, &d);
	assert_true(d.per_client); /* qps: 0 -> 1000 */
	{
		struct ndc_config a, b;

		cfg_of("forward: {per_client: false}\n", &a);
		cfg_of("forward: {per_client: false}\n", &b);
		b.forward.per_client.burst = 5;
		ndc_reload_diff(&b, &a, &a, false, &d);
		assert_false(d.per_client);
		ndc_config_free(&a);
		ndc_config_free(&b);
	}

	diff_of("", "log: {level: debug}\n", false, &d);
	assert_true(d.log_level);
	assert_false(d.log_queries);
	diff_of("", "log: {queries: true}\n", false, &d);
	assert_true(d.log_queries);
	diff_of("log: {queries: true}\n", "log: {queries: true, sample: 0.5}\n", false, &d);
	assert_true(d.log_queries);
	/* The sample rate of a query log that is off changes nothing. */
	diff_of("", "log: {sample: 0.5}\n", false, &d);
	assert_false(d.log_queries);
	assert_string_equal(d.restart, "");
}

static void test_diff_restart_keys(void **state)
{
	struct reload_diff d;

	(void)state;
	diff_of("", "cluster_domain: example.test\nlisten: 169.254.20.11\nport: 5353\n", false, &d);
	assert_string_equal(d.restart, "cluster_domain, listen, port");
	assert_no_live(&d);
	diff_of("", "source: {snapshot: /x.json}\n", false, &d);
	assert_string_equal(d.restart, "source");
	diff_of("source: {kubernetes: {}}\n", "source: {kubernetes: {kube_dns_configmap: false}}\n",
		false, &d);
	assert_string_equal(d.restart, "source");
	diff_of("",
		"dataplane:\n  mode: socket\n  interfaces: [eth*]\n  table_size: 2048\n"
		"  redirect_peer: true\n  failopen: false\n  pin_dir: /sys/fs/bpf/x\n",
		false, &d);
	assert_string_equal(d.restart,
			    "dataplane.mode, dataplane.interfaces, dataplane.table_size, "
			    "dataplane.redirect_peer, dataplane.failopen, dataplane.pin_dir");
	diff_of("", "dataplane: {dpdk: {burst: 64}}\n", false, &d);
	assert_string_equal(d.restart, "dataplane.dpdk");
	diff_of("dataplane: {dpdk: {lcores: [1, 2]}}\n", "dataplane: {dpdk: {lcores: [2, 1]}}\n",
		false, &d);
	assert_string_equal(d.restart, "dataplane.dpdk");
	diff_of("",
		"http: {listen: '127.0.0.1:9999'}\nworkers: 2\ntcp_idle_ms: 500\n"
		"tcp_max_conns: 10\n",
		false, &d);
	assert_string_equal(d.restart, "http.listen, workers, tcp_idle_ms, tcp_max_conns");
	assert_no_live(&d);
	/* Restart and live keys in one file: each where it belongs. */
	diff_of("", "port: 5353\nrecords: {ttl: 1}\n", false, &d);
	assert_string_equal(d.restart, "port");
	assert_string_equal(d.records, "records.ttl");
}

/* records.pods: insecure cannot be turned on while the fast path runs (set when it loads). */
static void test_diff_pods_fastpath(void **state)
{
	struct reload_diff d;
	struct ndc_config run, next;

	(void)state;
	diff_of("", "records: {pods: insecure, ttl: 9}\n", true, &d);
	assert_true(d.pods_kept);
	assert_string_equal(d.restart, "records.pods (insecure, with the fast path)");
	assert_string_equal(d.records, "records.ttl");
	/* Without the fast path, or to another mode, it is live. */
	diff_of("", "records: {pods: insecure}\n", false, &d);
	assert_false(d.pods_kept);
	assert_string_equal(d.restart, "");
	assert_string_equal(d.records, "records.pods");
	diff_of("", "records: {pods: verified}\n", true, &d);
	assert_false(d.pods_kept);
	assert_string_equal(d.records, "records.pods");
	/* Started insecure: the kernel has the suffix, going back to it is live. */
	cfg_of("records: {pods: insecure}\n", &run);
	cfg_of("records: {pods: insecure}\n", &next);
	{
		struct ndc_config cur;

		cfg_of("records: {pods: disabled}\n", &cur);
		ndc_reload_diff(&next, &cur, &run, true, &d);
		assert_false(d.pods_kept);
		assert_string_equal(d.records, "records.pods");
		ndc_config_free(&cur);
	}
	ndc_config_free(&run);
	ndc_config_free(&next);
}

/* Live keys against what is in effect (an earlier file), restart keys against the start. */
static void test_diff_against_which(void **state)
{
	struct ndc_config run, cur, next;
	struct reload_diff d;

	(void)state;
	cfg_of("port: 53\nrecords: {ttl: 5}\n", &run);
	cfg_of("port: 5353\nrecords: {ttl: 30}\n", &cur); /* a file applied since: port kept */
	cfg_of("port: 53\nrecords: {ttl: 30}\n", &next);  /* back to the running port */
	ndc_reload_diff(&next, &cur, &run, false, &d);
	assert_string_equal(d.restart, ""); /* what runs is port 53 */
	assert_string_equal(d.records, ""); /* ttl 30 is in effect already */
	ndc_reload_diff(&cur, &next, &run, false, &d);
	assert_string_equal(d.restart, "port");
	ndc_config_free(&run);
	ndc_config_free(&cur);
	ndc_config_free(&next);
}

/* ---- ndc_reload_file: what a file that cannot be applied leaves in effect ---------------- */

struct env {
	char dir[64], path[96];
	struct ndc_config running;
	struct ndc_cache *cache;
	struct ndc_forwarder *fwd;
	struct ndc_reload *rl;
	int rebuild_ret; /* what the next rebuild returns */
	unsigned int rebuilds;
	uint32_t rebuilt_ttl; /* records.ttl of the last rebuild asked */
};

static int rebuild(void *arg, const struct ndc_config *cfg)
{
	struct env *e = arg;

	e->rebuilds++;
	e->rebuilt_ttl = cfg->records.ttl;
	return e->rebuild_ret;
}

static void write_file(struct env *e, const char *text)
{
	FILE *f = fopen(e->path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* A reload as ndc_reload_start makes it, without the thread and the watches. */
static int env_setup(void **state)
{
	struct ndc_cache_opts co = {.max_entries = 1000,
				    .max_bytes = 1 << 20,
				    .max_ttl = 86400,
				    .neg_max_ttl = 3600,
				    .stale_max = 3600};
	struct env *e = calloc(1, sizeof(*e));
	struct kube_dns none = {0};
	struct routes rt;

	assert_non_null(e);
	snprintf(e->dir, sizeof(e->dir), "/tmp/ndc-test-reload-XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	snprintf(e->path, sizeof(e->path), "%s/ndcache.yaml", e->dir);
	/* An upstream on loopback: the forwarder is given it, no query is ever sent. */
	cfg_of("upstream: 127.0.0.1:5300\nrecords: {ttl: 5}\n", &e->running);
	assert_int_equal(ndc_cache_new(&co, &e->cache), 0);
	ndc_reload_routes_make(&e->running, e->running.cluster_domain, &none, false, &rt);
	assert_int_equal(ndc_forwarder_new(&rt.o, e->cache, &e->fwd), 0);

	e->rl = calloc(1, sizeof(*e->rl));
	assert_non_null(e->rl);
	e->rl->efd = e->rl->ifd = -1;
	pthread_mutex_init(&e->rl->lock, NULL);
	e->rl->path = strdup(e->path);
	assert_non_null(e->rl->path);
	e->rl->running = &e->running;
	e->rl->t = (struct ndc_reload_targets){
	    .cache = e->cache, .fwd = e->fwd, .rebuild = rebuild, .arg = e};
	atomic_store(&e->rl->last_ok, true);
	assert_int_equal(ndc_reload_routes_apply(e->rl, &rt), 1);
	*state = e;
	return 0;
}

static int env_teardown(void **state)
{
	struct env *e = *state;

	ndc_reload_stop(e->rl);
	ndc_forwarder_free(e->fwd);
	ndc_cache_free(e->cache);
	ndc_config_free(&e->running);
	unlink(e->path);
	rmdir(e->dir);
	free(e);
	return 0;
}

static uint64_t failures(const struct env *e)
{
	return atomic_load(&e->rl->failures);
}

static uint64_t reloads(const struct env *e)
{
	return atomic_load(&e->rl->reloads);
}

static void test_file_applied_then_refused(void **state)
{
	struct env *e = *state;
	const struct ndc_config *applied;

	/* A good file: the table is rebuilt with it, and it is what is in effect. */
	write_file(e, "upstream: 127.0.0.1:5300\nrecords: {ttl: 30}\ncache: {max_ttl: 60}\n");
	ndc_reload_file(e->rl, true);
	assert_int_equal(reloads(e), 1);
	assert_int_equal(failures(e), 0);
	assert_true(atomic_load(&e->rl->last_ok));
	assert_false(atomic_load(&e->rl->restart_needed));
	assert_int_equal(e->rebuilds, 1);
	assert_int_equal(e->rebuilt_ttl, 30);
	applied = ndc_reload_current(e->rl);
	assert_ptr_equal(applied, e->rl->file);
	assert_int_equal(applied->records.ttl, 30);
	assert_int_equal(applied->cache.max_ttl, 60);

	/* Broken YAML: refused, counted, and the file applied before stays in effect. */
	write_file(e, "records: {ttl: 31\n");
	ndc_reload_file(e->rl, true);
	assert_int_equal(failures(e), 1);
	assert_int_equal(reloads(e), 1);
	assert_false(atomic_load(&e->rl->last_ok));
	assert_ptr_equal(ndc_reload_current(e->rl), applied);
	assert_int_equal(applied->records.ttl, 30);

	/* A value out of range: the same. */
	write_file(e, "records: {ttl: 99999}\n");
	ndc_reload_file(e->rl, true);
	assert_int_equal(failures(e), 2);
	assert_ptr_equal(ndc_reload_current(e->rl), applied);

	/*
	 * A good file on its own (its own cluster_domain is a restart key), but a stub domain
	 * inside the cluster domain that runs.
	 */
	write_file(e, "cluster_domain: example.test\nupstream: 127.0.0.1:5300\n"
		      "stub_domains: {svc.cluster.local: 127.0.0.1}\n");
	ndc_reload_file(e->rl, true);
	assert_int_equal(failures(e), 3);
	assert_ptr_equal(ndc_reload_current(e->rl), applied);

	/* The record table cannot be built: nothing else changes either. */
	e->rebuild_ret = -ENOMEM;
	write_file(e, "upstream: 127.0.0.1:5300\nrecords: {ttl: 40}\ncache: {max_ttl: 70}\n");
	ndc_reload_file(e->rl, true);
	assert_int_equal(e->rebuilds, 2);
	assert_int_equal(failures(e), 4);
	assert_ptr_equal(ndc_reload_current(e->rl), applied);
	assert_int_equal(applied->cache.max_ttl, 60);

	/* The file gone: refused; back again, it is applied (nothing to rebuild). */
	e->rebuild_ret = 0;
	unlink(e->path);
	ndc_reload_file(e->rl, true);
	assert_int_equal(failures(e), 5);
	assert_ptr_equal(ndc_reload_current(e->rl), applied);
	write_file(e, "upstream: 127.0.0.1:5300\nrecords: {ttl: 30}\ncache: {max_ttl: 60}\n");
	ndc_reload_file(e->rl, true);
	assert_int_equal(reloads(e), 2);
	assert_true(atomic_load(&e->rl->last_ok));
	assert_int_equal(e->rebuilds, 2);
	assert_int_equal(ndc_reload_current(e->rl)->records.ttl, 30);
}

/* Restart keys are applied as nothing: the reload succeeds and says a restart is needed. */
static void test_file_restart_keys(void **state)
{
	struct env *e = *state;

	write_file(e, "upstream: 127.0.0.1:5300\nport: 5353\nworkers: 3\n");
	ndc_reload_file(e->rl, true);
	assert_int_equal(reloads(e), 1);
	assert_int_equal(failures(e), 0);
	assert_true(atomic_load(&e->rl->restart_needed));
	assert_int_equal(e->rebuilds, 0);
	assert_int_equal(e->running.port, 53); /* what the agent started with is never touched */
	assert_int_equal(e->running.workers, 0);

	/* Back to the running values: no restart needed any more. */
	write_file(e, "upstream: 127.0.0.1:5300\n");
	ndc_reload_file(e->rl, true);
	assert_int_equal(reloads(e), 2);
	assert_false(atomic_load(&e->rl->restart_needed));
}

/* Unforced, a file that reads as the last one read is not parsed again. */
static void test_file_unchanged(void **state)
{
	struct env *e = *state;

	write_file(e, "records: {ttl: 31\n");
	ndc_reload_file(e->rl, false);
	assert_int_equal(failures(e), 1);
	ndc_reload_file(e->rl, false);
	assert_int_equal(failures(e), 1); /* the same broken text: reported once */
	ndc_reload_file(e->rl, true);
	assert_int_equal(failures(e), 2); /* SIGHUP reads it again */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_diff_same),
	    cmocka_unit_test(test_diff_live_keys),
	    cmocka_unit_test(test_diff_restart_keys),
	    cmocka_unit_test(test_diff_pods_fastpath),
	    cmocka_unit_test(test_diff_against_which),
	    cmocka_unit_test_setup_teardown(test_file_applied_then_refused, env_setup,
					    env_teardown),
	    cmocka_unit_test_setup_teardown(test_file_restart_keys, env_setup, env_teardown),
	    cmocka_unit_test_setup_teardown(test_file_unchanged, env_setup, env_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
