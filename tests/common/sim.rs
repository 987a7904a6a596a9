//! An in-process cluster with a scriptable network: brokers are opened on their own data
//! directories, followers fetch from leaders through the real Fetch handler (encoded
//! requests in, encoded responses out), and the test decides which node is down, which
//! response is lost, and when each fetch round happens — so every step is deterministic.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use highwater::api::{Broker, Outcome};
use highwater::clock::Clock;
use highwater::ids::BrokerId;
use highwater::metadata::{PartitionImage, TopicImage};
use highwater::replica::fetch_session::FetchSession;
use highwater::replica::fetcher::{
    decode_fetch_response, encode_fetch, fetch_round, LeaderLink, LinkError, Round,
};
use highwater::replica::Partition;
use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::config;

/// The simulated clock's reading when a cluster starts (2023-11-14, like the records'
/// timestamps).
pub const SIM_START_MS: i64 = 1_700_000_000_000;

/// The network between the simulated brokers.
#[derive(Default)]
pub struct SimNetwork {
    brokers: Mutex<HashMap<i32, Arc<Broker>>>,
    down: Mutex<HashSet<i32>>,
    /// Followers whose next fetch reaches the leader but whose answer is lost.
    lose_next_response: Mutex<HashSet<i32>>,
    /// Each follower's fetch session with each leader, as its fetcher keeps it.
    sessions: Mutex<HashMap<(i32, i32), FetchSession>>,
}

/// One follower's view of the network.
pub struct SimLink {
    net: Arc<SimNetwork>,
    from: i32,
}

impl LeaderLink for SimLink {
    async fn fetch(
        &mut self,
        leader: BrokerId,
        request: FetchRequest,
    ) -> Result<FetchResponse, LinkError> {
        let unreachable = |reason: &str| LinkError::Unreachable {
            leader,
            reason: reason.to_string(),
        };
        let down = self.net.down.lock().expect("lock").clone();
        if down.contains(&leader.0) || down.contains(&self.from) {
            return Err(unreachable("down"));
        }
        let broker = self
            .net
            .brokers
            .lock()
            .expect("lock")
            .get(&leader.0)
            .cloned();
        let broker = broker.ok_or_else(|| unreachable("no such broker"))?;
        let frame = encode_fetch(&request, BrokerId(self.from), 1);
        let client = "127.0.0.1:1".parse().expect("addr");
        let request =
            highwater::server::connection::parse_request(frame, client, &"PLAINTEXT".into())
                .map_err(|e| unreachable(&format!("{e:?}")))?;
        let outcome = highwater::api::handle(&broker, &request)
            .await
            .map_err(|e| unreachable(&e.to_string()))?;
        let Outcome::Respond(frame) = outcome else {
            return Err(unreachable("no response"));
        };
        if self
            .net
            .lose_next_response
            .lock()
            .expect("lock")
            .remove(&self.from)
        {
            return Err(unreachable("response lost"));
        }
        let bytes: Vec<u8> = frame
            .chunks
            .iter()
            .flat_map(|c| c.iter().copied())
            .collect();
        decode_fetch_response(bytes::Bytes::from(bytes).split_off(4), leader)
    }
}

/// A simulated cluster of brokers, each with one topic "t" of one partition.
pub struct SimCluster {
    pub net: Arc<SimNetwork>,
    dirs: HashMap<i32, tempfile::TempDir>,
    /// Broker config keys every broker starts with.
    keys: Vec<(String, String)>,
    /// The time every broker reads: it moves only when the test moves it.
    pub clock: Clock,
}

impl SimCluster {
    /// Brokers `ids`, started.
    pub async fn new(ids: &[i32]) -> SimCluster {
        Self::with_config(ids, &[]).await
    }

    /// Brokers `ids`, started with extra broker config `keys`.
    pub async fn with_config(ids: &[i32], keys: &[(&str, &str)]) -> SimCluster {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let mut cluster = SimCluster {
            net: Arc::default(),
            dirs: HashMap::new(),
            keys: keys
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            clock: Clock::manual(SIM_START_MS),
        };
        for id in ids {
            cluster
                .dirs
                .insert(*id, tempfile::tempdir().expect("tempdir"));
            cluster.start(*id, ids[0]).await;
        }
        cluster
    }

    /// Opens broker `id` on its directory (after a crash: recovery runs), hosting t-0 as
    /// the metadata would give it: led by `leader` at epoch 0 (roles are set by the test
    /// after that), and connects it.
    pub async fn start(&mut self, id: i32, leader: i32) {
        let mut replicas: Vec<i32> = self.dirs.keys().copied().collect();
        replicas.sort_unstable();
        let mut partition = PartitionImage::new(replicas);
        partition.leader = leader;
        self.start_as(id, partition).await;
    }

    /// Opens broker `id` on its directory (after a crash: recovery runs), hosting t-0 with
    /// the role `partition` gives it, and connects it.
    pub async fn start_as(&mut self, id: i32, partition: PartitionImage) {
        let dir = self.dirs[&id].path();
        let node = id.to_string();
        let mut keys: Vec<(&str, &str)> = vec![("node.id", node.as_str())];
        keys.extend(self.keys.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let broker = Broker::open_with(config(dir, &keys), self.clock.clone(), Default::default())
            .await
            .expect("open");
        let mut image = (*broker.image()).clone();
        let topic = TopicImage {
            name: "t".into(),
            topic_id: uuid::Uuid::from_u128(1),
            partitions: vec![partition],
            configs: Default::default(),
        };
        image.topics.insert("t".into(), Arc::new(topic));
        broker
            .replicas
            .apply_image(&Arc::new(image))
            .expect("apply");
        self.net
            .brokers
            .lock()
            .expect("lock")
            .insert(id, Arc::new(broker));
        self.net.down.lock().expect("lock").remove(&id);
    }

    /// Kills broker `id` (no clean shutdown): it is unreachable until started again.
    pub fn crash(&mut self, id: i32) {
        self.net.down.lock().expect("lock").insert(id);
        self.net.brokers.lock().expect("lock").remove(&id);
        // Its fetch sessions as a follower die with it (those it led live on at their
        // followers, which learn of the loss from the restarted leader).
        let mut sessions = self.net.sessions.lock().expect("lock");
        sessions.retain(|(follower, _), _| *follower != id);
    }

    /// Loses the data of broker `id` past the first `bytes` of its first segment, as a
    /// power failure loses what was not flushed (call while it is down).
    pub fn lose_unflushed(&self, id: i32, bytes: u64) {
        let log = self.dirs[&id]
            .path()
            .join("t-0")
            .join(format!("{:020}.log", 0));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .expect("open");
        file.set_len(bytes).expect("truncate");
    }

    /// Whether broker `id` is up.
    pub fn is_up(&self, id: i32) -> bool {
        self.net.brokers.lock().expect("lock").contains_key(&id)
    }

    /// The data directory of broker `id`.
    pub fn dir(&self, id: i32) -> &std::path::Path {
        self.dirs[&id].path()
    }

    /// Partition t-0 on broker `id`.
    pub fn partition(&self, id: i32) -> Arc<Partition> {
        let broker = self.net.brokers.lock().expect("lock").get(&id).cloned();
        broker
            .expect("broker up")
            .replicas
            .partition("t", 0)
            .expect("partition")
    }

    /// Writes broker `id`'s checkpoints (high watermark included), as its periodic task does.
    pub fn checkpoint(&self, id: i32) {
        let broker = self.net.brokers.lock().expect("lock").get(&id).cloned();
        broker
            .expect("up")
            .replicas
            .write_checkpoints()
            .expect("checkpoints");
    }

    /// Loses the answer to `follower`'s next fetch (the leader still handles it).
    pub fn lose_next_response(&self, follower: i32) {
        self.net
            .lose_next_response
            .lock()
            .expect("lock")
            .insert(follower);
    }

    /// One fetch round of `follower` from `leader`.
    pub async fn fetch(&self, follower: i32, leader: i32) -> Result<Round, LinkError> {
        let mut link = SimLink {
            net: Arc::clone(&self.net),
            from: follower,
        };
        let partition = self.partition(follower);
        let taken = self
            .net
            .sessions
            .lock()
            .expect("lock")
            .remove(&(follower, leader));
        let mut session = taken.unwrap_or_default();
        let round = fetch_round(
            &mut link,
            &mut session,
            (BrokerId(follower), BrokerId(leader)),
            &[partition],
            0,
        )
        .await;
        let mut sessions = self.net.sessions.lock().expect("lock");
        sessions.insert((follower, leader), session);
        drop(sessions);
        round
    }

    /// Fetch rounds until one brings nothing and truncates nothing.
    pub async fn catch_up(&self, follower: i32, leader: i32) {
        for _ in 0..20 {
            let round = self.fetch(follower, leader).await.expect("fetch");
            if round.appended_bytes == 0 && round.truncations == 0 {
                return;
            }
        }
        panic!("follower {follower} did not settle");
    }
}

impl SimCluster {
    /// Sends `body` at `version` to broker `id`'s request handler and decodes the answer.
    pub async fn call<R: kafka_protocol::protocol::Request>(
        &self,
        id: i32,
        body: &R,
        version: i16,
    ) -> R::Response {
        let broker = self.broker(id).expect("up");
        call_on(&broker, body, version).await
    }

    /// Broker `id`, if up.
    pub fn broker(&self, id: i32) -> Option<Arc<Broker>> {
        self.net.brokers.lock().expect("lock").get(&id).cloned()
    }
}

/// Sends `body` at `version` to `broker`'s request handler and decodes the answer.
pub async fn call_on<R: kafka_protocol::protocol::Request>(
    broker: &Broker,
    body: &R,
    version: i16,
) -> R::Response {
    use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
    use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
    let key = ApiKey::try_from(R::KEY).expect("key");
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(1);
    let mut buf = bytes::BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .expect("header");
    body.encode(&mut buf, version).expect("body");
    let client = "127.0.0.1:1".parse().expect("addr");
    let request =
        highwater::server::connection::parse_request(buf.freeze(), client, &"PLAINTEXT".into())
            .expect("parse");
    let Outcome::Respond(frame) = highwater::api::handle(broker, &request)
        .await
        .expect("handled")
    else {
        panic!("no response");
    };
    let bytes: Vec<u8> = frame
        .chunks
        .iter()
        .flat_map(|c| c.iter().copied())
        .collect();
    let mut bytes = bytes::Bytes::from(bytes).split_off(4);
    ResponseHeader::decode(&mut bytes, R::Response::header_version(version)).expect("header");
    R::Response::decode(&mut bytes, version).expect("response")
}
