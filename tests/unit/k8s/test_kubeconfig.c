// SPDX-License-Identifier: MIT
/* kubeconfig and in-cluster settings: files written to a temporary directory, no network. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "k8s/k8s.h"

#define CA_PEM "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
/* base64 of CA_PEM */
#define CA_B64 \
	"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"

struct fx {
	char dir[64];
	char err[512];
	struct ndc_k8s_conn c;
};

static void put_file(struct fx *f, const char *name, const char *text)
{
	char p[256];
	FILE *fp;

	snprintf(p, sizeof(p), "%s/%s", f->dir, name);
	fp = fopen(p, "w");
	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
}

static const char *path_of(struct fx *f, const char *name)
{
	static char p[256];

	snprintf(p, sizeof(p), "%s/%s", f->dir, name);
	return p;
}

static int load(struct fx *f, const char *yaml)
{
	put_file(f, "config", yaml);
	return ndc_kubeconfig_load(path_of(f, "config"), &f->c, f->err, sizeof(f->err));
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/ndc-kubeconfig-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	*state = f;
	return 0;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	ndc_k8s_conn_free(&f->c);
	nftw(f->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(f);
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	return 0;
}

static void full_inline(void **state)
{
	struct fx *f = *state;

	assert_int_equal(load(f, "apiVersion: v1\n"
				 "kind: Config\n"
				 "clusters:\n"
				 "- name: other\n"
				 "  cluster:\n"
				 "    server: https://192.0.2.1:6443\n"
				 "- name: prod\n"
				 "  cluster:\n"
				 "    server: https://127.0.0.1:6443/\n"
				 "    certificate-authority-data: " CA_B64 "\n"
				 "contexts:\n"
				 "- name: a\n"
				 "  context: {cluster: other, user: nobody}\n"
				 "- name: b\n"
				 "  context:\n"
				 "    cluster: prod\n"
				 "    user: admin\n"
				 "    namespace: default\n"
				 "current-context: b\n"
				 "users:\n"
				 "- name: admin\n"
				 "  user:\n"
				 "    token: \"abc.def-123\"\n"),
			 0);
	assert_string_equal(f->c.server, "https://127.0.0.1:6443");
	assert_non_null(f->c.ca_data);
	assert_string_equal(f->c.ca_data, CA_PEM);
	assert_null(f->c.ca_file);
	assert_false(f->c.insecure);
	assert_string_equal(f->c.token, "abc.def-123");
	assert_null(f->c.token_file);
	assert_null(f->c.cert_file);
	assert_null(f->c.key_file);
	assert_null(f->c.cert_data);
	assert_null(f->c.key_data);
}

static void files_relative_insecure(void **state)
{
	struct fx *f = *state;
	char want[256];

	assert_int_equal(mkdir(path_of(f, "creds"), 0700), 0);
	put_file(f, "creds/token", "tok\n");
	put_file(f, "creds/client.pem", "cert");
	put_file(f, "creds/client.key", "key");
	put_file(f, "ca.pem", CA_PEM);
	assert_int_equal(load(f, "current-context: dev\n"
				 "contexts:\n"
				 "- name: dev\n"
				 "  context: {cluster: c1, user: u1}\n"
				 "clusters:\n"
				 "- name: c1\n"
				 "  cluster:\n"
				 "    server: https://[::1]:6443\n"
				 "    certificate-authority: ca.pem\n"
				 "    insecure-skip-tls-verify: true\n"
				 "users:\n"
				 "- name: u1\n"
				 "  user:\n"
				 "    tokenFile: creds/token\n"
				 "    client-certificate: creds/client.pem\n"
				 "    client-key: ./creds/client.key\n"),
			 0);
	assert_string_equal(f->c.server, "https://[::1]:6443");
	assert_true(f->c.insecure);
	snprintf(want, sizeof(want), "%s/ca.pem", f->dir);
	assert_string_equal(f->c.ca_file, want);
	snprintf(want, sizeof(want), "%s/creds/token", f->dir);
	assert_string_equal(f->c.token_file, want);
	snprintf(want, sizeof(want), "%s/creds/client.pem", f->dir);
	assert_string_equal(f->c.cert_file, want);
	snprintf(want, sizeof(want), "%s/./creds/client.key", f->dir);
	assert_string_equal(f->c.key_file, want);
	assert_null(f->c.token);
	assert_null(f->c.ca_data);
}

static void absolute_paths_and_cert_data(void **state)
{
	struct fx *f = *state;
	char y[2048];

	put_file(f, "ca.pem", CA_PEM);
	/* The data fields as kubectl writes them, and a folded block scalar with line breaks. */
	snprintf(y, sizeof(y),
		 "current-context: x\n"
		 "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
		 "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8080',"
		 " certificate-authority: %s/ca.pem, insecure-skip-tls-verify: false}}]\n"
		 "users:\n"
		 "- name: u\n"
		 "  user:\n"
		 "    client-certificate-data: Y2VydA==\n"
		 "    client-key-data: |\n"
		 "      a2V5\n"
		 "      LWRh\n"
		 "      dGE=\n",
		 f->dir);
	assert_int_equal(load(f, y), 0);
	assert_string_equal(f->c.server, "http://127.0.0.1:8080");
	assert_false(f->c.insecure);
	assert_string_equal(f->c.ca_file, path_of(f, "ca.pem"));
	assert_string_equal(f->c.cert_data, "cert");
	assert_string_equal(f->c.key_data, "key-data");
	assert_null(f->c.cert_file);
}

static void no_user_is_anonymous(void **state)
{
	struct fx *f = *state;

	assert_int_equal(load(f, "current-context: x\n"
				 "contexts: [{name: x, context: {cluster: c}}]\n"
				 "clusters: [{name: c, cluster: {server: https://127.0.0.1:1}}]\n"),
			 0);
	assert_null(f->c.token);
	assert_null(f->c.token_file);
}

struct bad {
	const char *yaml;
	int r;
	const char *msg;
};

static void errors(void **state)
{
	static const struct bad cases[] = {
	    {"clusters: []\n", -EINVAL, ": no current-context"},
	    {"current-context: nope\ncontexts: [{name: x, context: {cluster: c}}]\n", -EINVAL,
	     ": current-context 'nope' not found"},
	    {"current-context: x\ncontexts: [{name: x, context: {user: u}}]\n", -EINVAL,
	     ": context 'x' has no cluster"},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
	     "clusters: [{name: d, cluster: {server: https://127.0.0.1:1}}]\n",
	     -EINVAL, ": cluster 'c' not found"},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
	     "clusters: [{name: c, cluster: {insecure-skip-tls-verify: true}}]\n",
	     -EINVAL, ": cluster 'c' has no server"},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
	     "clusters: [{name: c, cluster: {server: 127.0.0.1:6443}}]\n",
	     -EINVAL, "is not an http(s) URL"},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
	     "clusters: [{name: c, cluster: {server: https://h, insecure-skip-tls-verify: "
	     "maybe}}]\n",
	     -EINVAL, "insecure-skip-tls-verify is not a boolean"},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
	     "clusters: [{name: c, cluster: {server: https://h}}]\n"
	     "users: [{name: v, user: {token: t}}]\n",
	     -EINVAL, ": user 'u' not found"},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
	     "clusters: [{name: c, cluster: {server: https://h, "
	     "certificate-authority-data: 'not*base64'}}]\n",
	     -EINVAL, ": cluster 'c': certificate-authority-data is not valid base64"},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
	     "clusters: [{name: c, cluster: {server: https://h, "
	     "certificate-authority-data: 'QQ=A'}}]\n",
	     -EINVAL, "certificate-authority-data is not valid base64"},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
	     "clusters: [{name: c, cluster: {server: https://h}}]\n"
	     "users: [{name: u, user: {client-key-data: 'QQ=='}}]\n",
	     -EINVAL, ": user 'u': client certificate and key must be given together"},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
	     "clusters: [{name: c, cluster: {server: https://h}}]\n"
	     "users: [{name: u, user: {exec: {command: aws}}}]\n",
	     -EOPNOTSUPP, "exec and auth-provider credentials are not supported"},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
	     "clusters: [{name: c, cluster: {server: https://h}}]\n"
	     "users: [{name: u, user: {tokenFile: missing/token}}]\n",
	     -ENOENT, ": user 'u': tokenFile "},
	    {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
	     "clusters: [{name: c, cluster: {server: https://h, certificate-authority: "
	     "/nonexistent/ca.pem}}]\n",
	     -ENOENT, ": cluster 'c': certificate-authority /nonexistent/ca.pem: No such file"},
	    {"current-context: [x\n", -EINVAL, ": YAML error at line "},
	    {"- a\n- b\n", -EINVAL, ": not a YAML mapping"},
	    /* Aliases expanding to 9^6 nodes: refused, not expanded. */
	    {"a: &a [x, x, x, x, x, x, x, x, x]\n"
	     "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
	     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
	     "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
	     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
	     "f: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
	     -EINVAL, ": unsupported YAML"},
	};
	struct fx *f = *state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char prefix[300];
		int r = load(f, cases[i].yaml);

		if (r != cases[i].r || !strstr(f->err, cases[i].msg))
			fail_msg("case %zu: r=%d err='%s', want %d '%s'", i, r, f->err, cases[i].r,
				 cases[i].msg);
		/* Every message names the file it is about. */
		snprintf(prefix, sizeof(prefix), "kubeconfig %s", path_of(f, "config"));
		assert_memory_equal(f->err, prefix, strlen(prefix));
		/* A failed load leaves nothing to free. */
		assert_null(f->c.server);
		assert_null(f->c.ca_data);
		assert_null(f->c.token);
	}
	assert_int_equal(ndc_kubeconfig_load(path_of(f, "absent"), &f->c, f->err, sizeof(f->err)),
			 -ENOENT);
	assert_non_null(strstr(f->err, "absent: No such file or directory"));
}

static void incluster(void **state)
{
	struct fx *f = *state;
	char want[256];

	assert_int_equal(mkdir(path_of(f, "sa"), 0700), 0);
	put_file(f, "sa/token", "jwt\n");
	put_file(f, "sa/ca.crt", CA_PEM);

	unsetenv("KUBERNETES_SERVICE_HOST");
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	assert_int_equal(ndc_k8s_incluster(path_of(f, "sa"), &f->c, f->err, sizeof(f->err)),
			 -ENOENT);
	assert_non_null(strstr(f->err, "not running in a cluster"));
	assert_null(f->c.server);

	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	assert_int_equal(ndc_k8s_incluster(path_of(f, "sa"), &f->c, f->err, sizeof(f->err)), 0);
	assert_string_equal(f->c.server, "https://10.96.0.1:443");
	snprintf(want, sizeof(want), "%s/sa/token", f->dir);
	assert_string_equal(f->c.token_file, want);
	snprintf(want, sizeof(want), "%s/sa/ca.crt", f->dir);
	assert_string_equal(f->c.ca_file, want);
	assert_null(f->c.token);
	assert_false(f->c.insecure);
	ndc_k8s_conn_free(&f->c);

	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
	assert_int_equal(ndc_k8s_incluster(path_of(f, "sa"), &f->c, f->err, sizeof(f->err)), 0);
	assert_string_equal(f->c.server, "https://[fd00:10:96::1]:6443");
	ndc_k8s_conn_free(&f->c);

	assert_int_equal(unlink(path_of(f, "sa/ca.crt")), 0);
	assert_int_equal(ndc_k8s_incluster(path_of(f, "sa"), &f->c, f->err, sizeof(f->err)),
			 -ENOENT);
	assert_non_null(strstr(f->err, "sa/ca.crt: No such file"));
	assert_null(f->c.server);
	assert_int_equal(ndc_k8s_incluster(path_of(f, "nosa"), &f->c, f->err, sizeof(f->err)),
			 -ENOENT);
	assert_non_null(strstr(f->err, "nosa/token"));
}

static void token_read_and_copy(void **state)
{
	struct fx *f = *state;
	struct ndc_k8s_conn copy;
	char *tok = (char *)1;

	put_file(f, "t1", "eyJhbGciOi.payload.sig\r\n \n");
	assert_int_equal(ndc_k8s_token_read(path_of(f, "t1"), &tok), 0);
	assert_string_equal(tok, "eyJhbGciOi.payload.sig");
	free(tok);
	put_file(f, "t2", " \n");
	assert_int_equal(ndc_k8s_token_read(path_of(f, "t2"), &tok), -EINVAL);
	assert_null(tok);
	assert_int_equal(ndc_k8s_token_read(path_of(f, "t3"), &tok), -ENOENT);

	assert_int_equal(load(f, "current-context: x\n"
				 "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
				 "clusters: [{name: c, cluster: {server: https://127.0.0.1:1, "
				 "certificate-authority-data: " CA_B64 "}}]\n"
				 "users: [{name: u, user: {token: abc, tokenFile: t1}}]\n"),
			 0);
	assert_int_equal(ndc_k8s_conn_copy(&f->c, &copy), 0);
	assert_string_equal(copy.server, f->c.server);
	assert_ptr_not_equal(copy.server, f->c.server);
	assert_string_equal(copy.ca_data, CA_PEM);
	assert_string_equal(copy.token, "abc");
	assert_string_equal(copy.token_file, f->c.token_file);
	assert_null(copy.cert_file);
	assert_false(copy.insecure);
	ndc_k8s_conn_free(&copy);
	assert_null(copy.server);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(full_inline, setup, teardown),
	    cmocka_unit_test_setup_teardown(files_relative_insecure, setup, teardown),
	    cmocka_unit_test_setup_teardown(absolute_paths_and_cert_data, setup, teardown),
	    cmocka_unit_test_setup_teardown(no_user_is_anonymous, setup, teardown),
	    cmocka_unit_test_setup_teardown(errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(incluster, setup, teardown),
	    cmocka_unit_test_setup_teardown(token_read_and_copy, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
