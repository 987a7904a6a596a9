# shellcheck shell=bash
# Sourced by compat/lib/secured_broker.sh for the compat suites that need TLS certificates
# (compat/tls, compat/acl): made with openssl in $certs, never committed.

# make_cert NAME CA SUBJECT [SAN]: NAME.key (PKCS#8, unencrypted), NAME.crt signed by CA,
# and NAME.pem (key then certificate), which is what a PEM keystore file holds.
make_cert() {
    local name="$1" ca="$2" subject="$3" san="${4:-}"
    openssl req -new -newkey rsa:2048 -nodes -keyout "$certs/$name.key" -subj "$subject" \
        -out "$certs/$name.csr" 2>/dev/null
    # Extensions make it an X.509 v3 certificate (rustls, like browsers, refuses v1).
    printf 'basicConstraints=CA:FALSE\n' >"$certs/$name.ext"
    [[ -z "$san" ]] || printf 'subjectAltName=%s\n' "$san" >>"$certs/$name.ext"
    openssl x509 -req -in "$certs/$name.csr" -CA "$certs/$ca.crt" -CAkey "$certs/$ca.key" \
        -CAcreateserial -days 2 -out "$certs/$name.crt" -extfile "$certs/$name.ext" 2>/dev/null
    cat "$certs/$name.key" "$certs/$name.crt" >"$certs/$name.pem"
}

# make_ca NAME: a self-signed CA, NAME.key and NAME.crt.
make_ca() {
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=highwater compat $1" \
        -keyout "$certs/$1.key" -out "$certs/$1.crt" 2>/dev/null
}
