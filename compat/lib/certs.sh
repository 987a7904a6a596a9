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

# make_signed_token NAME SUB AUDIENCE [KEY]: an RS256 JWT for SUB and AUDIENCE, valid for an
# hour, in $certs/NAME.jwt, signed by the RSA key KEY (default NAME; made if missing) whose
# JSON Web Key Set (kid "compat-KEY") is $certs/KEY.jwks.json. openssl signs, python3
# writes the key set.
make_signed_token() {
    local name="$1" sub="$2" aud="$3" key="${4:-$1}" now header claims signature modulus
    if [[ ! -f "$certs/$key.jwt-key" ]]; then
        openssl genrsa -out "$certs/$key.jwt-key" 2048 2>/dev/null
        modulus="$(openssl rsa -in "$certs/$key.jwt-key" -noout -modulus | cut -d= -f2)"
        python3 - "$modulus" "compat-$key" >"$certs/$key.jwks.json" <<'PY'
import base64, json, sys
n = base64.urlsafe_b64encode(bytes.fromhex(sys.argv[1])).rstrip(b"=").decode()
key = {"kty": "RSA", "kid": sys.argv[2], "alg": "RS256", "use": "sig", "n": n, "e": "AQAB"}
print(json.dumps({"keys": [key]}))
PY
    fi
    b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
    now="$(date +%s)"
    header="$(printf '{"alg":"RS256","kid":"compat-%s","typ":"JWT"}' "$key" | b64url)"
    claims="$(printf '{"sub":"%s","aud":"%s","iat":%d,"exp":%d}' "$sub" "$aud" "$now" \
        $((now + 3600)) | b64url)"
    signature="$(printf '%s.%s' "$header" "$claims" |
        openssl dgst -sha256 -sign "$certs/$key.jwt-key" -binary | b64url)"
    printf '%s.%s.%s\n' "$header" "$claims" "$signature" >"$certs/$name.jwt"
}
