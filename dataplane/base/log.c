// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ndc/log.h>

#define LINE_MAX_BYTES 4096
#define MSG_MAX 1024

int ndc_log_level = NDC_LOG_INFO;
static int log_format = NDC_LOG_TEXT;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void ndc_log_set_level(int level)
{
	__atomic_store_n(&ndc_log_level, level, __ATOMIC_RELAXED);
}

void ndc_log_set_format(enum ndc_log_format format)
{
	__atomic_store_n(&log_format, (int)format, __ATOMIC_RELAXED);
}

int ndc_log_level_from_name(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(name, level_names[i]))
			return i;
	return -1;
}

const char *ndc_log_level_name(int level)
{
	return level_names[level & 3];
}

int ndc_errf(int r, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

/* A line being built: appends stop at the cap, keeping room for the closing bytes. */
struct line {
	char buf[LINE_MAX_BYTES];
	size_t len, cap;
};

static void put(struct line *l, const char *s, size_t n)
{
	if (n > l->cap - l->len)
		n = l->cap - l->len;
	memcpy(l->buf + l->len, s, n);
	l->len += n;
}

static void puts_(struct line *l, const char *s)
{
	put(l, s, strlen(s));
}

/*
 * s as the inside of a JSON string (RFC 8259 7): quote, backslash and controls escaped. An
 * escape goes in whole or not at all, so a line cut here ends between characters.
 */
static bool put_json(struct line *l, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		size_t n = 1;

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			n = 2;
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			n = 6;
		} else {
			esc[0] = (char)c;
		}
		if (n > l->cap - l->len) {
			l->len = l->cap; /* full: nothing more goes in */
			return true;
		}
		put(l, esc, n);
	}
	return false;
}

/* A text value: as is when it is one plain word, else quoted with " and \ escaped. */
static void put_text_value(struct line *l, const char *s)
{
	bool plain = *s != '\0';

	for (const char *p = s; *p && plain; p++)
		plain = *p > ' ' && *p != '"' && *p != '\\' && *p != '=' && *p != 0x7f;
	if (plain) {
		puts_(l, s);
		return;
	}
	puts_(l, "\"");
	put_json(l, s);
	puts_(l, "\"");
}

static void put_time(struct line *l)
{
	struct timespec ts;
	struct tm tm;
	char t[64];
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(t, sizeof(t) - 8, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(t + n, sizeof(t) - n, ".%03uZ", (unsigned)(ts.tv_nsec / 1000000) % 1000);
	puts_(l, t);
}

static void emit(struct line *l)
{
	size_t off = 0;

	l->buf[l->len++] = '\n'; /* cap keeps room for it */
	while (off < l->len) {
		ssize_t n = write(STDERR_FILENO, l->buf + off, l->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		off += (size_t)n;
	}
}

static void log_line(int level, const char *msg, const struct ndc_log_field *f, size_t n)
{
	struct line l;
	char num[32];
	bool cut = false, in_msg = false;

	l.len = 0;
	if (__atomic_load_n(&log_format, __ATOMIC_RELAXED) == NDC_LOG_JSON) {
		/*
		 * Room for the closing ("\",\"fields\":{}}" at most) and the newline. The message
		 * and string values may be cut (then the string is closed where it was cut); a
		 * field goes in only with room for its key, its punctuation and a number, else it
		 * and the rest are left out, so the line stays one valid object.
		 */
		l.cap = sizeof(l.buf) - 16;
		puts_(&l, "{\"time\":\"");
		put_time(&l);
		puts_(&l, "\",\"level\":\"");
		puts_(&l, level_names[level & 3]);
		puts_(&l, "\",\"msg\":\"");
		in_msg = cut = put_json(&l, msg);
		if (!cut)
			puts_(&l, "\",\"fields\":{");
		for (size_t i = 0; i < n && !cut; i++) {
			if (l.cap - l.len < strlen(f[i].key) + 32)
				break;
			puts_(&l, i ? ",\"" : "\"");
			put_json(&l, f[i].key);
			puts_(&l, "\":");
			if (f[i].str) {
				puts_(&l, "\"");
				cut = put_json(&l, f[i].str);
				if (!cut)
					puts_(&l, "\"");
			} else {
				snprintf(num, sizeof(num), "%lld", f[i].num);
				puts_(&l, num);
			}
		}
		if (cut) {
			/* Cut inside a string: not inside a UTF-8 sequence either. */
			while (l.len && ((unsigned char)l.buf[l.len - 1] & 0xc0) == 0x80)
				l.len--;
			if (l.len && ((unsigned char)l.buf[l.len - 1] & 0xc0) == 0xc0)
				l.len--;
			l.cap = sizeof(l.buf) - 1;
			puts_(&l, in_msg ? "\",\"fields\":{}}" : "\"}}");
		} else {
			l.cap = sizeof(l.buf) - 1;
			puts_(&l, "}}");
		}
	} else {
		l.cap = sizeof(l.buf) - 1;
		puts_(&l, "ndcache: ");
		puts_(&l, level_names[level & 3]);
		puts_(&l, ": ");
		puts_(&l, msg);
		for (size_t i = 0; i < n; i++) {
			puts_(&l, " ");
			puts_(&l, f[i].key);
			puts_(&l, "=");
			if (f[i].str) {
				put_text_value(&l, f[i].str);
			} else {
				snprintf(num, sizeof(num), "%lld", f[i].num);
				puts_(&l, num);
			}
		}
	}
	emit(&l);
}

void ndc_log(int level, const char *fmt, ...)
{
	char msg[MSG_MAX];
	va_list ap;

	if (level > __atomic_load_n(&ndc_log_level, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_line(level, msg, NULL, 0);
}

void ndc_log_fields(int level, const char *msg, const struct ndc_log_field *f, size_t n)
{
	if (level > __atomic_load_n(&ndc_log_level, __ATOMIC_RELAXED))
		return;
	log_line(level, msg, f, n);
}
