#!/usr/bin/env bash
# Makes the TLS material for the fake API server tests, with the openssl CLI, into DIR:
#   ca.pem ca.key                 test CA
#   server.pem server.key         server cert signed by ca: SAN 127.0.0.1, ::1, localhost
#                                 (plus any extra SANs given as arguments, e.g. IP:169.254.0.1)
#   client.pem client.key         client cert (CN=ndcache-test, O=system:masters) signed by ca
#   other-ca.pem other-ca.key     a second, unrelated CA ("wrong CA" tests)
#   other-client.pem other-client.key   client cert signed by other-ca (rejected by the server)
#   other-server.pem other-server.key   server cert for 127.0.0.1 signed by other-ca
# Usage: make_certs.sh DIR [EXTRA_SAN...]
set -euo pipefail

if [ $# -lt 1 ]; then
	echo "usage: $0 DIR [EXTRA_SAN...]" >&2
	exit 2
fi
dir=$1
shift
mkdir -p "$dir"
cd "$dir"

san="IP:127.0.0.1,IP:::1,DNS:localhost"
for extra in "$@"; do
	san="$san,$extra"
done
days=3650
# EC P-256 keys: fast to make, and what kubeadm-era clusters commonly use.
newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

mkca() { # name subject
	newkey "$1.key"
	openssl req -x509 -new -key "$1.key" -sha256 -days $days -subj "$2" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" \
		-addext "subjectKeyIdentifier=hash" -out "$1.pem" 2>/dev/null
}

mkleaf() { # name ca subject extensions
	newkey "$1.key"
	openssl req -new -key "$1.key" -subj "$3" -out "$1.csr" 2>/dev/null
	printf '%s\n' "$4" >"$1.ext"
	openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
		-sha256 -days $days -extfile "$1.ext" -out "$1.pem" 2>/dev/null
	rm -f "$1.csr" "$1.ext"
}

server_ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$san"
client_ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"

mkca ca "/CN=ndcache-test-ca"
mkca other-ca "/CN=ndcache-other-ca"
mkleaf server ca "/CN=kube-apiserver" "$server_ext"
mkleaf client ca "/O=system:masters/CN=ndcache-test" "$client_ext"
mkleaf other-server other-ca "/CN=kube-apiserver" "$server_ext"
mkleaf other-client other-ca "/O=system:masters/CN=ndcache-test" "$client_ext"
rm -f ./*.srl
chmod 600 ./*.key

openssl verify -CAfile ca.pem server.pem client.pem >/dev/null
openssl verify -CAfile other-ca.pem other-server.pem other-client.pem >/dev/null
