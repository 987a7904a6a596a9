// Package compat runs franz-go (github.com/twmb/franz-go) against the broker whose address
// is in COMPAT_BOOTSTRAP (compat/go/run.sh HOST:PORT sets it).
package compat

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	partitions   = 4
	perPartition = 1000
)

func bootstrap(t *testing.T) string {
	b := os.Getenv("COMPAT_BOOTSTRAP")
	if b == "" {
		t.Fatal("set COMPAT_BOOTSTRAP=host:port (compat/go/run.sh does)")
	}
	return b
}

// unique is a name no earlier run used, so reruns on one broker never collide.
func unique(prefix string) string {
	return fmt.Sprintf("compat-go-%s-%d-%04d", prefix, time.Now().UnixNano()%1_000_000_000,
		rand.Intn(10_000))
}

// logger: COMPAT_KGO_LOG=debug|info|warn|error logs the clients to stderr.
func logger() kgo.Opt {
	var level kgo.LogLevel
	switch os.Getenv("COMPAT_KGO_LOG") {
	case "debug":
		level = kgo.LogLevelDebug
	case "info":
		level = kgo.LogLevelInfo
	case "warn":
		level = kgo.LogLevelWarn
	case "error":
		level = kgo.LogLevelError
	default:
		level = kgo.LogLevelNone
	}
	return kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil))
}

func newClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(bootstrap(t)),
		logger(),
		kgo.RequestTimeoutOverhead(10 * time.Second),
		kgo.RetryTimeout(30 * time.Second),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// waitFor polls cond every 200 ms until it holds, failing after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func createTopic(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	waitFor(t, 30*time.Second, "leaders of "+topic, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		d, ok := md.Topics[topic]
		if !ok || d.Err != nil || len(d.Partitions) != partitions {
			return false
		}
		for _, p := range d.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
		return true
	})
}

// offsets turns kadm's listed offsets of one topic into partition -> offset.
func offsets(l kadm.ListedOffsets, topic string) (map[int32]int64, error) {
	out := map[int32]int64{}
	if err := l.Error(); err != nil {
		return nil, err
	}
	for p, o := range l[topic] {
		out[p] = o.Offset
	}
	return out, nil
}

func equal(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// instance is one copy of the ETL: a GroupTransactSession that consumes the input in the
// group (read_committed) and, per poll, produces each record to the same partition of the
// output in one transaction that also commits the consumed offsets. With closeAfter >= 0 it
// is closed in the middle of its transaction after that many commits: records produced and
// flushed, then Close (which leaves the group) without ending the transaction, which the
// coordinator aborts when transaction.timeout.ms (10 s) has passed.
type instance struct {
	name       string
	closeAfter int
	sess       *kgo.GroupTransactSession
	commits    atomic.Int64
	aborts     atomic.Int64
	closedWith atomic.Int64 // records in the transaction left open by the close
	closed     atomic.Bool
	assigned   atomic.Int64 // partitions of the input it holds
	err        atomic.Value // error
	done       chan struct{}
}

func startInstance(t *testing.T, name, txnID, group, input, output string,
	closeAfter int) *instance {
	t.Helper()
	in := &instance{name: name, closeAfter: closeAfter, done: make(chan struct{})}
	count := func(ps map[string][]int32) int64 { return int64(len(ps[input])) }
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(bootstrap(t)),
		logger(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			in.assigned.Add(count(ps))
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			in.assigned.Add(-count(ps))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			in.assigned.Add(-count(ps))
		}),
		kgo.ClientID(name),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(10*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(1*time.Second),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequestTimeoutOverhead(10*time.Second),
		kgo.RetryTimeout(30*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	in.sess = sess
	return in
}

func (in *instance) fail(err error) {
	in.err.CompareAndSwap(nil, err)
}

func (in *instance) failure() error {
	if e, ok := in.err.Load().(error); ok {
		return e
	}
	return nil
}

// run is the ETL loop; it returns when ctx is cancelled or the instance is closed mid-way.
func (in *instance) run(ctx context.Context, output string) {
	defer close(in.done)
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := in.sess.PollRecords(pollCtx, 50)
		cancel()
		if fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				in.fail(fmt.Errorf("%s: fetch %s/%d: %w", in.name, topic, p, err))
			}
		})
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := in.sess.Begin(); err != nil {
			in.fail(fmt.Errorf("%s: begin: %w", in.name, err))
			return
		}
		promise := kgo.AbortingFirstErrPromise(in.sess.Client())
		fetches.EachRecord(func(r *kgo.Record) {
			in.sess.Produce(ctx, &kgo.Record{Topic: output, Partition: r.Partition,
				Key: r.Key, Value: r.Value}, promise.Promise())
		})
		if in.closeAfter >= 0 && in.commits.Load() >= int64(in.closeAfter) {
			flushCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := in.sess.Client().Flush(flushCtx)
			cancel()
			if err != nil || promise.Err() != nil {
				in.fail(fmt.Errorf("%s: flush before the close: %v %v", in.name, err,
					promise.Err()))
			}
			in.closedWith.Store(int64(fetches.NumRecords()))
			in.closed.Store(true)
			in.sess.Close()
			return
		}
		endCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		committed, err := in.sess.End(endCtx, promise.Err() == nil)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				in.fail(fmt.Errorf("%s: end: %w", in.name, err))
			}
			return
		}
		if committed {
			in.commits.Add(1)
		} else {
			// A rebalance (the other instance left) or a failed produce: the session aborted
			// and rewound to the committed offsets.
			in.aborts.Add(1)
		}
	}
}

// closeWithin closes the session unless it was closed mid-way, giving up after limit.
func (in *instance) closeWithin(limit time.Duration) {
	if in.closed.Load() {
		return
	}
	done := make(chan struct{})
	go func() {
		in.sess.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
	}
}

func (in *instance) String() string {
	return fmt.Sprintf("%s(commits %d, aborts %d)", in.name, in.commits.Load(), in.aborts.Load())
}

// readAll consumes every partition of topic from the start at the given isolation level
// until want records arrived, and then for one more second (to see any extra ones); the
// values by partition.
func readAll(t *testing.T, topic string, level kgo.IsolationLevel, want int) map[int32][]string {
	t.Helper()
	at := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		at[p] = kgo.NewOffset().AtStart()
	}
	cl := newClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: at}),
		kgo.FetchIsolationLevel(level))
	defer cl.Close()
	got := map[int32][]string{}
	n := 0
	deadline := time.Now().Add(30 * time.Second)
	var extra time.Time
	for {
		now := time.Now()
		if n >= want && extra.IsZero() {
			extra = now.Add(time.Second)
		}
		if (!extra.IsZero() && now.After(extra)) || now.After(deadline) {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	return got
}

// TestGroupTransactSessionCopiesEveryRecordOnceWhenAnInstanceIsClosedMidTransaction: two
// GroupTransactSession instances split 4 input partitions and copy 4,000 records to the
// output; one is closed in the middle of a flushed transaction after 5 commits (its
// partitions move to the other, which resumes at the committed offsets; the coordinator
// aborts the open transaction after its 10 s timeout). When the group's committed offsets
// reach the input's ends and the output's last stable offset its high watermark, a
// read_committed consumer of the output must see every input record exactly once, in
// order, and a read_uncommitted one also the records of the transaction left open.
func TestGroupTransactSessionCopiesEveryRecordOnceWhenAnInstanceIsClosedMidTransaction(
	t *testing.T) {
	start := time.Now()
	input, output, group := unique("etl-in"), unique("etl-out"), unique("etl-group")
	admCl := newClient(t)
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	createTopic(t, adm, input)
	createTopic(t, adm, output)

	runCtx, stop := context.WithTimeout(context.Background(), 150*time.Second)
	defer stop()
	a := startInstance(t, "a", group+"-a", group, input, output, 5)
	b := startInstance(t, "b", group+"-b", group, input, output, -1)
	all := []*instance{a, b}
	var wg sync.WaitGroup
	for _, in := range all {
		wg.Add(1)
		go func(in *instance) {
			defer wg.Done()
			in.run(runCtx, output)
		}(in)
	}
	defer func() {
		stop()
		for _, in := range all {
			in.closeWithin(30 * time.Second)
		}
		wg.Wait()
	}()
	check := func() {
		for _, in := range all {
			if err := in.failure(); err != nil {
				t.Fatalf("instance failed: %v", err)
			}
		}
	}
	waitFor(t, 60*time.Second, "each instance to hold 2 of the 4 input partitions", func() bool {
		check()
		return a.assigned.Load() == 2 && b.assigned.Load() == 2
	})
	t.Logf("both instances hold 2 partitions after %s", time.Since(start).Round(time.Millisecond))

	// The input: "p<P>-<i>" for i < 1000 on each partition P (idempotent, acks=all).
	prod := newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var records []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			records = append(records, &kgo.Record{Topic: input, Partition: p,
				Value: []byte(fmt.Sprintf("p%d-%d", p, i))})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	if err := prod.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("producing the input: %v", err)
	}
	cancel()
	prod.Close()

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	listed, err := adm.ListEndOffsets(ctx, input)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	ends, err := offsets(listed, input)
	if err != nil {
		t.Fatal(err)
	}

	waitFor(t, 90*time.Second, "a to be closed in its 6th transaction", func() bool {
		check()
		return a.closed.Load()
	})
	t.Logf("a closed after %s with %d records in its open transaction",
		time.Since(start).Round(time.Millisecond), a.closedWith.Load())

	var commits map[int32]int64
	waitFor(t, 90*time.Second, "the group's committed offsets to reach the input's ends", func() bool {
		check()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		fetched, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		commits = map[int32]int64{}
		for p, o := range fetched[input] {
			if o.Err == nil {
				commits[p] = o.At
			}
		}
		return equal(ends, commits)
	})
	stop()
	for _, in := range all {
		in.closeWithin(30 * time.Second)
	}
	wg.Wait()
	check()
	t.Logf("the group committed the input's ends after %s: %v %v",
		time.Since(start).Round(time.Millisecond), a, b)

	// The open transaction of a holds the output's LSO until the coordinator aborts it.
	var hwm map[int32]int64
	waitFor(t, 60*time.Second, "the output's last stable offsets to reach its high watermarks", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		high, err1 := adm.ListEndOffsets(ctx, output)
		stable, err2 := adm.ListCommittedOffsets(ctx, output)
		if err1 != nil || err2 != nil {
			return false
		}
		h, err1 := offsets(high, output)
		s, err2 := offsets(stable, output)
		hwm = h
		return err1 == nil && err2 == nil && equal(h, s)
	})
	t.Logf("the output's LSO reached its high watermarks %v after %s", hwm,
		time.Since(start).Round(time.Millisecond))

	committed := readAll(t, output, kgo.ReadCommitted(), partitions*perPartition)
	for p := int32(0); p < partitions; p++ {
		var want []string
		for i := 0; i < perPartition; i++ {
			want = append(want, fmt.Sprintf("p%d-%d", p, i))
		}
		if got := committed[p]; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("output partition %d, read_committed: %d records, want each of the %d "+
				"input records once, in order; first differences: %s", p, len(got),
				perPartition, firstDiff(want, got))
		}
	}
	uncommitted := readAll(t, output, kgo.ReadUncommitted(), partitions*perPartition)
	n := 0
	for _, vs := range uncommitted {
		n += len(vs)
	}
	if extra := n - partitions*perPartition; extra < int(a.closedWith.Load()) {
		t.Errorf("read_uncommitted shows %d records beyond the input's; a's open transaction "+
			"held %d", extra, a.closedWith.Load())
	}
	t.Logf("done after %s: read_uncommitted %d records (%d of a's open transaction)",
		time.Since(start).Round(time.Millisecond), n, a.closedWith.Load())
}

// firstDiff describes where got departs from want: the first index that differs, and the
// values that are missing or duplicated.
func firstDiff(want, got []string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	var missing, dup []string
	for _, v := range want {
		if seen[v] == 0 {
			missing = append(missing, v)
		}
	}
	for v, c := range seen {
		if c > 1 {
			dup = append(dup, v)
		}
	}
	sort.Strings(dup)
	clip := func(s []string) []string {
		if len(s) > 10 {
			return append(s[:10:10], "...")
		}
		return s
	}
	return fmt.Sprintf("index %d; missing %d %v; duplicated %d %v", i, len(missing),
		clip(missing), len(dup), clip(dup))
}
