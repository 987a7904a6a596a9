// Command loadgen is the benchmark's efficient load generator (issue 16): franz-go's
// client producing or consuming as fast as it can, or producing at a fixed rate, with
// what a reader needs to tell who was the bottleneck — the client's own CPU seconds —
// and, when producing, each record's latency from Produce to its acknowledgement in
// microseconds. It prints one JSON object on stdout.
//
//	loadgen create  -brokers B -topic T -partitions P -rf R  (seconds until all are led)
//	loadgen delete  -brokers B -topic T  (deletes it, so its files leave the page cache)
//	loadgen ready   -brokers B -topic T -partitions P -rf R  (the same, for an existing topic)
//	loadgen metadata -brokers B -records N  (N Metadata requests for all topics, timed)
//	loadgen group   -brokers B -topic T -partitions P -members M  (seconds until assigned)
//	loadgen produce -brokers B -topic T -size S (-records N | -seconds S) [-acks 1|all]
//	                [-linger-ms L] [-rate R] [-keys K]
//	loadgen consume -brokers B -topic T -records N
//
// Every mode also takes -tls-ca FILE (TLS, trusting the PEM certificates in FILE) and
// -sasl-plain USER:PASSWORD (SASL/PLAIN), to measure secured listeners (issue 15).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// Result is what one run prints.
type Result struct {
	Records    int64             `json:"records"`
	Bytes      int64             `json:"bytes"`
	Seconds    float64           `json:"seconds"`
	ClientCPUS float64           `json:"client_cpu_s"`
	LatencyUS  map[string]int64  `json:"latency_us,omitempty"`
	Errors     int64             `json:"errors"`
	Config     map[string]string `json:"config"`
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: loadgen create|produce|consume [flags]")
	}
	mode, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	brokers := fs.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	topic := fs.String("topic", "loadgen", "topic")
	partitions := fs.Int("partitions", 1, "create: partitions")
	rf := fs.Int("rf", 1, "create: replication factor")
	size := fs.Int("size", 100, "produce: value bytes per record")
	records := fs.Int64("records", 0, "records to produce or consume")
	seconds := fs.Float64("seconds", 0, "produce: for this long instead of -records")
	acks := fs.String("acks", "1", "produce: 1 or all")
	linger := fs.Int("linger-ms", 0, "produce: linger")
	rate := fs.Int("rate", 0, "produce: records per second (0: as fast as possible)")
	timeout := fs.Duration("timeout", 600*time.Second, "create, ready, group: give up after")
	members := fs.Int("members", 10, "group: consumers in the group")
	keys := fs.Int("keys", 0, "produce: distinct keys cycled through (0: no key, sticky partitioning)")
	tlsCA := fs.String("tls-ca", "", "connect over TLS, trusting the PEM certificates of this file")
	saslPlain := fs.String("sasl-plain", "", "authenticate with SASL/PLAIN as USER:PASSWORD")
	_ = fs.Parse(args)
	secure(*tlsCA, *saslPlain)
	seeds := strings.Split(*brokers, ",")
	var result Result
	switch mode {
	case "create":
		start := time.Now()
		create(seeds, *topic, int32(*partitions), int16(*rf), *timeout)
		result.Seconds = time.Since(start).Seconds()
		result.Config = map[string]string{"topic": *topic}
	case "delete":
		remove(seeds, *topic, *timeout)
	case "ready":
		start := time.Now()
		ready(seeds, *topic, int32(*partitions), int16(*rf), *timeout)
		result.Seconds = time.Since(start).Seconds()
	case "metadata":
		result = metadata(seeds, *records)
	case "group":
		result = group(seeds, *topic, *members, int32(*partitions), *timeout)
	case "produce":
		result = produce(seeds, *topic, *size, *records, *seconds, *acks, *linger, *rate, *keys)
	case "consume":
		result = consume(seeds, *topic, *records)
	default:
		fail("unknown mode " + mode)
	}
	result.ClientCPUS = cpuSeconds()
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}

// security is what every client of this run adds to its options: TLS and SASL, if asked.
var security []kgo.Opt

// secure sets security from the -tls-ca and -sasl-plain flags.
func secure(caFile, plainUser string) {
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			fail(err.Error())
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			fail("no PEM certificate in " + caFile)
		}
		security = append(security, kgo.DialTLSConfig(&tls.Config{RootCAs: roots}))
	}
	if plainUser != "" {
		user, pass, ok := strings.Cut(plainUser, ":")
		if !ok {
			fail("-sasl-plain takes USER:PASSWORD")
		}
		security = append(security, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	}
}

// newClient is a client of the brokers `seeds` with `opts` and this run's security.
func newClient(seeds []string, opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)
	return kgo.NewClient(append(all, security...)...)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "loadgen:", msg)
	os.Exit(1)
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// withAdmin runs do with a client of seeds and a context that ends after timeout.
func withAdmin(seeds []string, timeout time.Duration, do func(context.Context, *kgo.Client, *kadm.Client)) {
	cl, err := newClient(seeds)
	if err != nil {
		fail(err.Error())
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	do(ctx, cl, kadm.NewClient(cl))
}

// failOn ends the run when the request or its answer failed.
func failOn(what string, err, answered error) {
	if err == nil {
		err = answered
	}
	if err != nil {
		fail(what + ": " + err.Error())
	}
}

func create(seeds []string, topic string, partitions int32, rf int16, timeout time.Duration) {
	withAdmin(seeds, timeout, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) {
		resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
		failOn("create "+topic, err, resp.Err)
		waitReady(ctx, cl, topic, partitions, rf)
	})
}

func remove(seeds []string, topic string, timeout time.Duration) {
	withAdmin(seeds, timeout, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) {
		resp, err := adm.DeleteTopic(ctx, topic)
		failOn("delete "+topic, err, resp.Err)
	})
}

// waitReady returns once every partition of topic has a leader and an ISR of rf replicas
// in a Metadata answer, or fails when ctx ends first.
func waitReady(ctx context.Context, cl *kgo.Client, topic string, partitions int32, rf int16) {
	adm := kadm.NewClient(cl)
	last := "no metadata"
	for ; ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			last = err.Error()
			continue
		}
		t, ok := md.Topics[topic]
		if !ok || t.Err != nil || len(t.Partitions) != int(partitions) {
			last = fmt.Sprintf("topic not there with %d partitions", partitions)
			continue
		}
		failed, leaderless, short := 0, 0, 0
		for _, p := range t.Partitions {
			switch {
			case p.Err != nil:
				failed++
			case p.Leader < 0:
				leaderless++
			case len(p.ISR) != int(rf):
				short++
			}
		}
		if failed+leaderless+short == 0 {
			return
		}
		last = fmt.Sprintf("%d partitions with an error, %d without a leader, %d with an ISR not of %d",
			failed, leaderless, short, rf)
	}
	fail(fmt.Sprintf("topic %s: not every partition led with an ISR of %d in time (last seen: %s)", topic, rf, last))
}

// ready waits, retrying connections, until topic is ready (after a broker restart).
func ready(seeds []string, topic string, partitions int32, rf int16, timeout time.Duration) {
	cl, err := newClient(seeds)
	if err != nil {
		fail(err.Error())
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	waitReady(ctx, cl, topic, partitions, rf)
}

// metadata times n Metadata requests for all topics, one at a time on one connection.
func metadata(seeds []string, n int64) Result {
	cl, err := newClient(seeds)
	if err != nil {
		fail(err.Error())
	}
	defer cl.Close()
	ctx := context.Background()
	samples := newSamples(1)
	var partitions int64
	for i := int64(0); i <= n; i++ {
		req := kmsg.NewPtrMetadataRequest() // Topics nil: every topic
		at := time.Now()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			fail("metadata: " + err.Error())
		}
		if i == 0 {
			continue // the first one also connects
		}
		samples.add(time.Since(at))
		partitions = 0
		for _, t := range resp.Topics {
			partitions += int64(len(t.Partitions))
		}
	}
	return Result{Records: n, LatencyUS: samples.percentiles(),
		Config: map[string]string{"partitions_seen": fmt.Sprint(partitions)}}
}

// group starts members consumers in one new group on topic and returns the seconds until
// their assignments cover all its partitions, each member holding at least one.
func group(seeds []string, topic string, members int, partitions int32, timeout time.Duration) Result {
	var mu sync.Mutex
	owned := make([]map[int32]bool, members)
	done := make(chan struct{})
	var once sync.Once
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		total := 0
		for _, m := range owned {
			if len(m) == 0 {
				return
			}
			total += len(m)
		}
		if total == int(partitions) {
			once.Do(func() { close(done) })
		}
	}
	name := fmt.Sprintf("loadgen-%d", time.Now().UnixNano())
	start := time.Now()
	var clients []*kgo.Client
	for i := 0; i < members; i++ {
		i := i
		owned[i] = map[int32]bool{}
		cl, err := newClient(seeds, kgo.ConsumerGroup(name),
			kgo.ConsumeTopics(topic),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, got map[string][]int32) {
				mu.Lock()
				for _, p := range got[topic] {
					owned[i][p] = true
				}
				mu.Unlock()
				check()
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
				mu.Lock()
				for _, p := range lost[topic] {
					delete(owned[i], p)
				}
				mu.Unlock()
			}))
		if err != nil {
			fail(err.Error())
		}
		clients = append(clients, cl)
		go func() {
			for {
				if f := cl.PollFetches(context.Background()); f.IsClientClosed() {
					return
				}
			}
		}()
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		fail(fmt.Sprintf("group of %d over %d partitions not assigned in %s", members, partitions, timeout))
	}
	return Result{Seconds: time.Since(start).Seconds(),
		Config: map[string]string{"members": fmt.Sprint(members), "topic": topic}}
}

func produce(seeds []string, topic string, size int, records int64, seconds float64,
	acks string, linger, rate, keys int) Result {
	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchMaxBytes(1 << 20),
		kgo.ProducerLinger(time.Duration(linger) * time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(1 << 16),
	}
	if acks == "all" {
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	} else {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := newClient(seeds, opts...)
	if err != nil {
		fail(err.Error())
	}
	defer cl.Close()
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	var keyList [][]byte
	for i := 0; i < keys; i++ {
		keyList = append(keyList, []byte(fmt.Sprintf("key-%06d", i)))
	}
	samples := newSamples(rate)
	var acked, failed atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	start := time.Now()
	var deadline time.Time
	if seconds > 0 {
		deadline = start.Add(time.Duration(seconds * float64(time.Second)))
	}
	var sent int64
	for ; records == 0 || sent < records; sent++ {
		if rate > 0 {
			due := start.Add(time.Duration(float64(sent) / float64(rate) * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
		}
		if !deadline.IsZero() && sent%256 == 0 && time.Now().After(deadline) {
			break
		}
		r := &kgo.Record{Value: value}
		if keys > 0 {
			r.Key = keyList[sent%int64(keys)]
		}
		wg.Add(1)
		at := time.Now()
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
				return
			}
			acked.Add(1)
			samples.add(time.Since(at))
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	n := acked.Load()
	return Result{
		Records: n, Bytes: n * int64(size), Seconds: elapsed, Errors: failed.Load(),
		LatencyUS: samples.percentiles(),
		Config: map[string]string{"acks": acks, "linger_ms": fmt.Sprint(linger),
			"size": fmt.Sprint(size), "rate": fmt.Sprint(rate), "topic": topic},
	}
}

// samples keeps every latency (in µs) of a fixed-rate run, and one in 64 of an
// unthrottled one, whose latencies are mostly queueing in the client.
type samples struct {
	mu    sync.Mutex
	every int64
	n     int64
	us    []int64
}

func newSamples(rate int) *samples {
	every := int64(64)
	if rate > 0 {
		every = 1
	}
	return &samples{every: every, us: make([]int64, 0, 1<<16)}
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if s.n%s.every == 0 {
		s.us = append(s.us, d.Microseconds())
	}
}

func (s *samples) percentiles() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.us) == 0 {
		return nil
	}
	sort.Slice(s.us, func(i, j int) bool { return s.us[i] < s.us[j] })
	at := func(q float64) int64 { return s.us[int(q*float64(len(s.us)-1))] }
	return map[string]int64{"p50": at(0.5), "p99": at(0.99), "p99.9": at(0.999),
		"max": s.us[len(s.us)-1], "count": int64(len(s.us))}
}

func consume(seeds []string, topic string, records int64) Result {
	cl, err := newClient(seeds,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(8<<20),
	)
	if err != nil {
		fail(err.Error())
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	var n, bytes, errs int64
	start := time.Now()
	for n < records {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			fail(fmt.Sprintf("consumed %d of %d records before the timeout", n, records))
		}
		fetches.EachError(func(string, int32, error) { errs++ })
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			bytes += int64(len(r.Value))
		})
	}
	return Result{Records: n, Bytes: bytes, Seconds: time.Since(start).Seconds(), Errors: errs,
		Config: map[string]string{"topic": topic}}
}
