// Command secure-roundtrip is franz-go's round trip over a secured listener
// (compat/tls/run.sh): it produces the lines one, two, three to partition 0 of -topic
// (created first) and reads them back from the beginning, printing each; it exits 1 on an
// error or after 30 s. TLS with -ca (and -cert/-key for a client certificate); SASL with
// -mechanism and -user/-password (a delegation token's id and base64 HMAC with
// -delegation-token, SCRAM only), or OAUTHBEARER with the token in -token-file.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func main() {
	bootstrap := flag.String("bootstrap", "", "host:port")
	topic := flag.String("topic", "", "topic")
	ca := flag.String("ca", "", "PEM certificates to trust")
	cert := flag.String("cert", "", "client certificate (PEM)")
	key := flag.String("key", "", "client key (PEM)")
	mechanism := flag.String("mechanism", "", "SASL mechanism")
	user := flag.String("user", "", "SASL user")
	password := flag.String("password", "", "SASL password")
	tokenFile := flag.String("token-file", "", "OAUTHBEARER token")
	isToken := flag.Bool("delegation-token", false, "SCRAM with a delegation token")
	flag.Parse()
	who := credentials{*mechanism, *user, *password, *tokenFile, *isToken}
	if err := run(*bootstrap, *topic, *ca, *cert, *key, who); err != nil {
		fmt.Fprintln(os.Stderr, "secure-roundtrip:", err)
		os.Exit(1)
	}
}

// credentials: how the client logs in with SASL (no mechanism: it does not).
type credentials struct {
	mechanism, user, password, tokenFile string
	isToken                              bool
}

func run(bootstrap, topic, ca, cert, key string, who credentials) error {
	pem, err := os.ReadFile(ca)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("no certificate in %s", ca)
	}
	tlsConfig := &tls.Config{RootCAs: roots}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return err
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.DialTLSConfig(tlsConfig)}
	if who.mechanism != "" {
		m, err := login(who)
		if err != nil {
			return err
		}
		opts = append(opts, kgo.SASL(m))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	created, err := kadm.NewClient(admin).CreateTopic(ctx, 1, -1, nil, topic)
	admin.Close()
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	producer, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return err
	}
	for _, line := range []string{"one", "two", "three"} {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(line), Partition: 0}).FirstErr(); err != nil {
			producer.Close()
			return fmt.Errorf("produce: %w", err)
		}
	}
	producer.Close()
	consumer, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return err
	}
	defer consumer.Close()
	var got []string
	for len(got) < 3 {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %d of 3: %w", len(got), err)
		}
		for _, e := range fetches.Errors() {
			return fmt.Errorf("fetch: %w", e.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	fmt.Println(strings.Join(got, "\n"))
	return nil
}

func login(who credentials) (sasl.Mechanism, error) {
	switch who.mechanism {
	case "PLAIN":
		return plain.Auth{User: who.user, Pass: who.password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: who.user, Pass: who.password, IsToken: who.isToken}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: who.user, Pass: who.password, IsToken: who.isToken}.AsSha512Mechanism(), nil
	case "OAUTHBEARER":
		token, err := os.ReadFile(who.tokenFile)
		if err != nil {
			return nil, err
		}
		return oauth.Auth{Token: strings.TrimSpace(string(token))}.AsMechanism(), nil
	}
	return nil, fmt.Errorf("unknown mechanism %s", who.mechanism)
}
