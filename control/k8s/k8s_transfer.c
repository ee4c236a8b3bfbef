// SPDX-License-Identifier: MIT
/*
 * One HTTP request to the API server on a worker's curl handle: the bearer token (re-read when the
 * kubelet rotates it, and once more after a 401), the handle's fixed options (TLS, timeouts,
 * keepalive), and the transfer loop that curl_multi_wakeup() can interrupt, with the write
 * callback that hands a 200 response to the parsers in k8s_stream.c. Kept apart from the
 * list/watch protocol in k8s_client.c, which only asks for a URL and reads t->status and
 * t->abort: this is all of the client's libcurl and credential handling in one place.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include <ndc/log.h>

#include "internal.h"

#ifndef NDC_VERSION
#define NDC_VERSION "dev"
#endif

/* An error response body is only read for its Status message. */
#define NDC_K8S_MAX_ERROR_BODY ((size_t)64 << 10)
#define NDC_K8S_CONNECT_TIMEOUT_MS 10000L
/* A list stalled this long is dead; a watch may be silent for its whole timeoutSeconds. */
#define NDC_K8S_LIST_STALL_S 60L
#define NDC_K8S_WATCH_GRACE_S 30L
#define NDC_K8S_POLL_MS 1000

/* ---- bearer token ---------------------------------------------------------------------------- */

/*
 * The kubelet rotates projected service-account tokens by replacing the file (a new inode via
 * a symlink swap), so a change in inode, size or mtime means re-read. force: after a 401.
 * Returns true when the token changed.
 */
bool ndc_k8s_token_refresh(struct ndc_k8s_watch *w, bool force)
{
	const char *path = w->conn.token_file;
	bool changed = false;
	struct stat st;
	char *tok;
	int r;

	if (!path)
		return false;
	pthread_mutex_lock(&w->token_lock);
	if (stat(path, &st) < 0) {
		if (force)
			ndc_warn("k8s: token file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!force && w->token_st_valid && st.st_ino == w->token_st.st_ino &&
	    st.st_dev == w->token_st.st_dev && st.st_size == w->token_st.st_size &&
	    st.st_mtim.tv_sec == w->token_st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == w->token_st.st_mtim.tv_nsec)
		goto out;
	r = ndc_k8s_token_read(path, &tok);
	if (r < 0) {
		ndc_warn("k8s: token file %s: %s", path,
			 r == -EINVAL ? "empty or too large" : strerror(-r));
		goto out;
	}
	w->token_st = st;
	w->token_st_valid = true;
	if (!w->token || strcmp(w->token, tok)) {
		free(w->token);
		w->token = tok;
		changed = true;
		ndc_info("k8s: read a new token from %s", path);
	} else {
		free(tok);
	}
out:
	pthread_mutex_unlock(&w->token_lock);
	return changed;
}

static struct curl_slist *request_headers(struct ndc_k8s_watch *w)
{
	struct curl_slist *h, *n;
	char *auth = NULL;

	h = curl_slist_append(NULL, "Accept: application/json");
	if (!h)
		return NULL;
	pthread_mutex_lock(&w->token_lock);
	if (w->token && asprintf(&auth, "Authorization: Bearer %s", w->token) < 0)
		auth = NULL;
	pthread_mutex_unlock(&w->token_lock);
	if (!auth)
		return h;
	n = curl_slist_append(h, auth);
	/* The header holds a credential: do not leave copies in freed heap memory. */
	explicit_bzero(auth, strlen(auth));
	free(auth);
	if (!n) {
		curl_slist_free_all(h);
		return NULL;
	}
	return n;
}

/* ---- one HTTP transfer ------------------------------------------------------------------------
 */

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct worker *t = arg;
	size_t len = size * nmemb;

	if (ndc_k8s_stopping(t->w)) {
		t->abort = ABORT_STOP;
		return CURL_WRITEFUNC_ERROR;
	}
	if (!t->status) {
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
		if (t->status != 200)
			t->body.max = NDC_K8S_MAX_ERROR_BODY;
		else if (t->asking != SYNC_HOWS && t->w->answered)
			t->w->answered(t);
	}
	if (t->status == 200)
		return t->watching ? ndc_k8s_feed_stream(t, data, len)
				   : ndc_k8s_list_feed(t, data, len);
	if (ndc_k8s_buf_add(&t->body, data, len) < 0) {
		/* An oversized error body still tells us the status; ignore the rest. */
		if (t->status != 200)
			return len;
		t->abort = ABORT_TOO_BIG;
		return CURL_WRITEFUNC_ERROR;
	}
	return len;
}

/*
 * Runs one request to completion or until stop. Returns 0 with t->status set (t->abort says if
 * the write callback cut it short), -ECANCELED on stop, -EIO on a transport error (logged).
 */
static int run_transfer(struct worker *t, const char *url, struct curl_slist *hdrs)
{
	struct ndc_k8s_watch *w = t->w;
	CURLcode cc = CURLE_OK;
	CURLMcode mc;
	CURLMsg *msg;
	int running = 1, left;

	t->status = 0;
	t->abort = ABORT_NONE;
	t->body.len = 0;
	t->body.max = NDC_K8S_MAX_BODY;
	t->received = 0;
	memset(&t->ls, 0, sizeof(t->ls));
	t->item.len = 0;
	t->item.max = NDC_K8S_MAX_BODY;
	t->errbuf[0] = '\0';
	json_tokener_reset(t->tok);
	curl_easy_setopt(t->easy, CURLOPT_URL, url);
	curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, hdrs);
	if (t->watching) {
		curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_LIMIT, 0L);
		curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_TIME, 0L);
		/* The server ends the stream after timeoutSeconds; past that it is a dead peer. */
		curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS,
				 ((long)w->opts.timeout_s + NDC_K8S_WATCH_GRACE_S) * 1000L);
	} else {
		curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, 0L);
		curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_TIME, NDC_K8S_LIST_STALL_S);
	}
	mc = curl_multi_add_handle(t->multi, t->easy);
	if (mc != CURLM_OK) {
		ndc_warn("k8s %s: %s", t->ki->name, curl_multi_strerror(mc));
		return -EIO;
	}
	while (running) {
		mc = curl_multi_perform(t->multi, &running);
		if (mc != CURLM_OK || !running)
			break;
		if (ndc_k8s_stopping(w))
			break;
		mc = curl_multi_poll(t->multi, NULL, 0, NDC_K8S_POLL_MS, NULL);
		if (mc != CURLM_OK)
			break;
	}
	while ((msg = curl_multi_info_read(t->multi, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == t->easy)
			cc = msg->data.result;
	curl_multi_remove_handle(t->multi, t->easy);
	if (ndc_k8s_stopping(w))
		return -ECANCELED;
	if (mc != CURLM_OK) {
		ndc_warn("k8s %s: %s", t->ki->name, curl_multi_strerror(mc));
		return -EIO;
	}
	if (running) /* cannot happen: the loop only ends early on stop or error */
		return -EIO;
	if (cc == CURLE_WRITE_ERROR && t->abort != ABORT_NONE)
		return 0;
	if (cc != CURLE_OK) {
		ndc_warn("k8s %s: %s: %s", t->ki->name, t->watching ? "watch" : "list",
			 t->errbuf[0] ? t->errbuf : curl_easy_strerror(cc));
		return -EIO;
	}
	if (!t->status)
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
	if (ndc_log_level >= NDC_LOG_DEBUG) {
		long conns = 0;

		curl_easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &conns);
		ndc_debug("k8s %s: %s: HTTP %ld, %ld new connection(s)", t->ki->name,
			  t->watching ? "watch" : "list", t->status, conns);
	}
	return 0;
}

/*
 * One request, with one immediate retry when a 401 made us re-read a token file that had
 * changed. Returns 0 with t->status set, -EACCES after a 401, or run_transfer's error.
 */
int ndc_k8s_request(struct worker *t, const char *url)
{
	struct ndc_k8s_watch *w = t->w;

	for (int attempt = 0;; attempt++) {
		struct curl_slist *hdrs;
		int r;

		ndc_k8s_token_refresh(w, false);
		hdrs = request_headers(w);
		if (!hdrs)
			return -ENOMEM;
		r = run_transfer(t, url, hdrs);
		curl_slist_free_all(hdrs);
		if (r < 0)
			return r;
		if (t->status != 401)
			return 0;
		ndc_k8s_count(&w->st.auth_failures);
		if (attempt == 0 && ndc_k8s_token_refresh(w, true))
			continue;
		ndc_warn("k8s %s: 401 Unauthorized: %s", t->ki->name, ndc_k8s_status_message(t));
		return -EACCES;
	}
}

/* ---- handle setup ---- */

static int set_blob(CURL *e, CURLoption opt, const char *pem)
{
	struct curl_blob b = {.data = (void *)pem, .len = strlen(pem), .flags = CURL_BLOB_COPY};

	return curl_easy_setopt(e, opt, &b) == CURLE_OK ? 0 : -EINVAL;
}

/* Options that stay the same for every request of the handle (so its connection is reused). */
int ndc_k8s_setup_easy(struct worker *t)
{
	const struct ndc_k8s_conn *c = &t->w->conn;
	CURL *e = t->easy;
	int r = 0;

	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "ndcache/" NDC_VERSION);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, NDC_K8S_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	if (c->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (c->ca_data || c->ca_file) {
		/* The cluster CA alone, as kubectl does: not the system store as well. */
		curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
		if (c->ca_data) {
			curl_easy_setopt(e, CURLOPT_CAINFO, NULL);
			r |= set_blob(e, CURLOPT_CAINFO_BLOB, c->ca_data);
		} else {
			r |= curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file) ? -EINVAL : 0;
		}
	}
	/* client-go prefers the inline data over the file when both are given. */
	if (c->cert_data)
		r |= set_blob(e, CURLOPT_SSLCERT_BLOB, c->cert_data);
	else if (c->cert_file)
		r |= curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file) ? -EINVAL : 0;
	if (c->key_data)
		r |= set_blob(e, CURLOPT_SSLKEY_BLOB, c->key_data);
	else if (c->key_file)
		r |= curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file) ? -EINVAL : 0;
	if (c->cert_data || c->cert_file) {
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
	}
	return r ? -EINVAL : 0;
}
