//! ACLs (issue 15) with Kafka's StandardAuthorizer configured, over the raw protocol:
//! SASL/PLAIN users are principals; a super user may do everything, anyone else only what
//! an ALLOW binding grants and no DENY binding forbids; refusals carry the error codes
//! Kafka answers (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and the
//! topics a principal may not describe are not shown; delegation tokens of other owners
//! take the user ACLs Kafka checks (CREATE_TOKENS, DESCRIBE_TOKENS). Real clients (kafka-acls, console
//! tools) are in compat/tls/run.sh, against Kafka too; a TLS client's certificate subject
//! as its principal is in tests/listeners.rs.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    user_admin=\"admin-secret\" user_alice=\"alice-secret\" \
                    user_bob=\"bob-secret\";";

// Kafka's wire codes of resource types, pattern types, operations and permissions.
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const ANY: i8 = 1;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const ALL: i8 = 2;
const READ: i8 = 3;
const WRITE: i8 = 4;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

const TOPIC_REFUSED: i16 = ResponseError::TopicAuthorizationFailed.code();
const GROUP_REFUSED: i16 = ResponseError::GroupAuthorizationFailed.code();
const CLUSTER_REFUSED: i16 = ResponseError::ClusterAuthorizationFailed.code();
const TXN_REFUSED: i16 = ResponseError::TransactionalIdAuthorizationFailed.code();

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// A broker whose one listener is SASL_PLAINTEXT (users admin, alice, bob), with the
/// StandardAuthorizer and `extra` keys; its address.
async fn broker(dir: &std::path::Path, extra: &[(&str, &str)]) -> SocketAddr {
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = socket.local_addr().expect("addr");
    let listeners = format!("SASL_PLAINTEXT://{addr}");
    let mut keys = vec![
        ("listeners", listeners.as_str()),
        ("advertised.listeners", listeners.as_str()),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("super.users", "User:admin"),
    ];
    keys.extend_from_slice(extra);
    let (_broker, stop) = serve_on(dir, &keys, vec![socket]).await;
    std::mem::forget(stop);
    addr
}

/// A client logged in as `user` (SASL/PLAIN, password `<user>-secret`).
async fn login(addr: SocketAddr, user: &str) -> Client {
    let mut client = Client::connect(addr).await;
    let handshake = SaslHandshakeRequest::default().with_mechanism(s("PLAIN"));
    assert_eq!(client.call(&handshake, 1).await.error_code, 0);
    let token = format!("\0{user}\0{user}-secret").into_bytes();
    let done = client
        .call(
            &SaslAuthenticateRequest::default().with_auth_bytes(token.into()),
            2,
        )
        .await;
    assert_eq!(
        done.error_code, 0,
        "{user} logs in: {:?}",
        done.error_message
    );
    client
}

fn binding(
    resource: (i8, &str, i8),
    principal: &str,
    operation: i8,
    permission: i8,
) -> AclCreation {
    AclCreation::default()
        .with_resource_type(resource.0)
        .with_resource_name(s(resource.1))
        .with_resource_pattern_type(resource.2)
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(operation)
        .with_permission_type(permission)
}

/// Creates `bindings`; the error code of each.
async fn create_acls(client: &mut Client, bindings: Vec<AclCreation>) -> Vec<i16> {
    let answer = client
        .call(&CreateAclsRequest::default().with_creations(bindings), 3)
        .await;
    answer.results.iter().map(|r| r.error_code).collect()
}

/// DescribeAcls of every binding: the error code and how many were described.
async fn described_bindings(client: &mut Client) -> (i16, usize) {
    let all = DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(ANY)
        .with_pattern_type_filter(ANY)
        .with_operation(ANY)
        .with_permission_type(ANY);
    let described = client.call(&all, 3).await;
    let count = described.resources.iter().map(|r| r.acls.len()).sum();
    (described.error_code, count)
}

/// DeleteAcls of every DENY binding on a topic: the error code and how many were deleted.
async fn delete_topic_denials(client: &mut Client) -> (i16, usize) {
    let denials = DeleteAclsFilter::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(TOPIC)
        .with_pattern_type_filter(ANY)
        .with_operation(ANY)
        .with_permission_type(DENY);
    let request = DeleteAclsRequest::default().with_filters(vec![denials]);
    let deleted = client.call(&request, 3).await;
    let result = &deleted.filter_results[0];
    (result.error_code, result.matching_acls.len())
}

/// The code of a Produce of one record to `topic` partition 0.
async fn produce_code(client: &mut Client, topic: &str) -> i16 {
    produce(client, topic, 0, batch(1, -1, 0, now_ms()))
        .await
        .error_code
}

/// The code of a Fetch of `topic` partition 0.
async fn fetch_code(client: &mut Client, topic: &str) -> i16 {
    fetch(client, topic, 0, 0).await.error_code
}

/// The topics Metadata shows for "all topics".
async fn visible_topics(client: &mut Client) -> Vec<String> {
    let answer = client
        .call(&MetadataRequest::default().with_topics(None), 12)
        .await;
    let mut names: Vec<String> = answer
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    names.sort();
    names
}

/// Waits (up to 10 s) until `$probe` answers `$want`: an ACL change reaches the broker's
/// image through the metadata log.
macro_rules! settles {
    ($want:expr, $what:expr, $probe:expr) => {{
        let mut tries = 0;
        loop {
            let got = $probe;
            if got == $want {
                break;
            }
            tries += 1;
            assert!(tries < 100, "{}: wanted {}, answered {got}", $what, $want);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }};
}

#[tokio::test]
async fn without_a_binding_a_principal_is_refused_with_kafka_error_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = broker(dir.path(), &[]).await;
    let mut admin = login(addr, "admin").await;
    assert_eq!(create_topic(&mut admin, "orders", 1).await, 0);
    assert_eq!(create_topic(&mut admin, "secret", 1).await, 0);
    assert_eq!(produce_code(&mut admin, "orders").await, 0, "super user");

    // No binding names alice: everything is refused, and no topic is shown.
    let mut alice = login(addr, "alice").await;
    assert_eq!(produce_code(&mut alice, "orders").await, TOPIC_REFUSED);
    assert_eq!(fetch_code(&mut alice, "orders").await, TOPIC_REFUSED);
    assert!(visible_topics(&mut alice).await.is_empty());
    assert_eq!(create_topic(&mut alice, "mine", 1).await, TOPIC_REFUSED);
    let join = groups::join(&mut alice, "g").await;
    assert_eq!(join.error_code, GROUP_REFUSED);
    let txn = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s("tx"))))
        .with_transaction_timeout_ms(10_000);
    assert_eq!(alice.call(&txn, 4).await.error_code, TXN_REFUSED);
    let refused = create_acls(
        &mut alice,
        vec![binding(
            (TOPIC, "orders", LITERAL),
            "User:alice",
            ALL,
            ALLOW,
        )],
    )
    .await;
    assert_eq!(refused, [CLUSTER_REFUSED], "CreateAcls needs cluster ALTER");
    let dirs = alice.call(&DescribeLogDirsRequest::default(), 4).await;
    assert_eq!(dirs.error_code, CLUSTER_REFUSED);
    assert!(dirs.results.is_empty());
}

#[tokio::test]
async fn allow_bindings_grant_and_a_deny_binding_wins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = broker(dir.path(), &[]).await;
    let mut admin = login(addr, "admin").await;
    assert_eq!(create_topic(&mut admin, "orders", 1).await, 0);
    assert_eq!(create_topic(&mut admin, "secret", 1).await, 0);
    let mut alice = login(addr, "alice").await;
    // WRITE on orders, READ on every topic starting "ord", READ on group g.
    let created = create_acls(
        &mut admin,
        vec![
            binding((TOPIC, "orders", LITERAL), "User:alice", WRITE, ALLOW),
            binding((TOPIC, "ord", PREFIXED), "User:alice", READ, ALLOW),
            binding((GROUP, "g", LITERAL), "User:alice", READ, ALLOW),
        ],
    )
    .await;
    assert_eq!(created, [0, 0, 0]);
    settles!(
        0,
        "alice writes orders",
        produce_code(&mut alice, "orders").await
    );
    assert_eq!(fetch_code(&mut alice, "orders").await, 0);
    assert_eq!(fetch_code(&mut alice, "secret").await, TOPIC_REFUSED);
    assert_eq!(
        visible_topics(&mut alice).await,
        ["orders"],
        "WRITE and READ imply DESCRIBE"
    );
    assert_ne!(
        groups::join(&mut alice, "g").await.error_code,
        GROUP_REFUSED
    );
    let mut bob = login(addr, "bob").await;
    assert_eq!(produce_code(&mut bob, "orders").await, TOPIC_REFUSED);
    assert!(visible_topics(&mut bob).await.is_empty());

    // A DENY binding wins over the prefixed ALLOW.
    let denied = create_acls(
        &mut admin,
        vec![binding(
            (TOPIC, "orders", LITERAL),
            "User:alice",
            READ,
            DENY,
        )],
    )
    .await;
    assert_eq!(denied, [0]);
    settles!(
        TOPIC_REFUSED,
        "DENY wins",
        fetch_code(&mut alice, "orders").await
    );
    assert_eq!(produce_code(&mut alice, "orders").await, 0, "WRITE is kept");

    assert_eq!(described_bindings(&mut admin).await, (0, 4));
    assert_eq!(described_bindings(&mut alice).await.0, CLUSTER_REFUSED);

    // Deleting the DENY binding gives READ back.
    assert_eq!(delete_topic_denials(&mut admin).await, (0, 1));
    settles!(0, "DENY deleted", fetch_code(&mut alice, "orders").await);
}

#[tokio::test]
async fn allow_everyone_if_no_acl_found_opens_only_resources_no_binding_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = [("allow.everyone.if.no.acl.found", "true")];
    let addr = broker(dir.path(), &extra).await;
    let mut admin = login(addr, "admin").await;
    assert_eq!(create_topic(&mut admin, "open", 1).await, 0);
    assert_eq!(create_topic(&mut admin, "guarded", 1).await, 0);
    let created = create_acls(
        &mut admin,
        vec![binding(
            (TOPIC, "guarded", LITERAL),
            "User:alice",
            WRITE,
            ALLOW,
        )],
    )
    .await;
    assert_eq!(created, [0]);
    let mut bob = login(addr, "bob").await;
    settles!(
        TOPIC_REFUSED,
        "a named topic is guarded",
        produce_code(&mut bob, "guarded").await
    );
    assert_eq!(
        produce_code(&mut bob, "open").await,
        0,
        "no binding names it"
    );
    let mut alice = login(addr, "alice").await;
    assert_eq!(produce_code(&mut alice, "guarded").await, 0);
    // The cluster is a resource no binding names either.
    let dirs = bob.call(&DescribeLogDirsRequest::default(), 4).await;
    assert_eq!(dirs.error_code, 0);
    let cluster = create_acls(
        &mut admin,
        vec![binding(
            (CLUSTER, "kafka-cluster", LITERAL),
            "User:alice",
            ALL,
            ALLOW,
        )],
    )
    .await;
    assert_eq!(cluster, [0]);
    settles!(
        CLUSTER_REFUSED,
        "the cluster is named now",
        bob.call(&DescribeLogDirsRequest::default(), 4)
            .await
            .error_code
    );
}

/// DescribeDelegationToken (all owners): the ids of the tokens shown.
async fn tokens_shown(client: &mut Client) -> Vec<String> {
    let request = DescribeDelegationTokenRequest::default().with_owners(None);
    let response = client.call(&request, 3).await;
    assert_eq!(response.error_code, 0);
    response
        .tokens
        .iter()
        .map(|t| t.token_id.to_string())
        .collect()
}

#[tokio::test]
async fn delegation_tokens_of_other_owners_take_the_user_acls_kafka_checks() {
    // Kafka: a token for another owner needs CREATE_TOKENS on that user; a token is
    // described to its owner, requester and renewers, and to holders of DESCRIBE_TOKENS on
    // its owner (or DESCRIBE on the token).
    const USER: i8 = 7;
    const CREATE_TOKENS: i8 = 13;
    const DESCRIBE_TOKENS: i8 = 14;
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = broker(dir.path(), &[("delegation.token.secret.key", "s3cret")]).await;
    let mut admin = login(addr, "admin").await;
    let mut alice = login(addr, "alice").await;
    let mut bob = login(addr, "bob").await;
    let own = bob.call(&CreateDelegationTokenRequest::default(), 3).await;
    assert_eq!(own.error_code, 0, "a token for oneself needs no ACL");
    assert!(tokens_shown(&mut alice).await.is_empty(), "not alice's");
    assert_eq!(tokens_shown(&mut admin).await, [own.token_id.to_string()]);

    let for_bob = CreateDelegationTokenRequest::default()
        .with_owner_principal_type(Some(s("User")))
        .with_owner_principal_name(Some(s("bob")));
    let refused = alice.call(&for_bob, 3).await;
    assert_eq!(
        refused.error_code,
        ResponseError::DelegationTokenAuthorizationFailed.code()
    );
    let grants = vec![
        binding(
            (USER, "User:bob", LITERAL),
            "User:alice",
            CREATE_TOKENS,
            ALLOW,
        ),
        binding(
            (USER, "User:bob", LITERAL),
            "User:alice",
            DESCRIBE_TOKENS,
            ALLOW,
        ),
    ];
    assert_eq!(create_acls(&mut admin, grants).await, [0, 0]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let made = loop {
        let answer = alice.call(&for_bob, 3).await;
        if answer.error_code == 0 {
            break answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the grant never applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(made.principal_name.as_str(), "bob", "owned by bob");
    assert_eq!(made.token_requester_principal_name.as_str(), "alice");
    let mut shown = tokens_shown(&mut alice).await;
    shown.sort();
    let mut both = vec![own.token_id.to_string(), made.token_id.to_string()];
    both.sort();
    assert_eq!(shown, both, "DESCRIBE_TOKENS on bob shows bob's tokens");
    assert_eq!(tokens_shown(&mut bob).await.len(), 2, "bob owns both");
}
