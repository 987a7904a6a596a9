//! SASL/PLAIN (RFC 4616) as Kafka's broker serves it: a client's single message
//! `authzid NUL authcid NUL passwd` is checked against the listener's users (read from its
//! JAAS config by `config::sasl`).

use std::collections::BTreeMap;

/// Why a PLAIN message is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    #[error("Authentication failed: Invalid username or password")]
    InvalidCredentials,
    #[error("Authentication failed: Client requested an authorization id that is different from username")]
    AuthorizationId,
    #[error("Invalid SASL/PLAIN response: expected 3 tokens, got {0}")]
    Malformed(usize),
}

/// Checks a client's PLAIN message against `users`; the authenticated user name.
pub fn authenticate(
    message: &[u8],
    users: &BTreeMap<String, String>,
) -> Result<String, PlainError> {
    let tokens: Vec<&[u8]> = message.split(|b| *b == 0).collect();
    let [authzid, user, password] = tokens[..] else {
        return Err(PlainError::Malformed(tokens.len()));
    };
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| PlainError::InvalidCredentials);
    let (authzid, user, password) = (text(authzid)?, text(user)?, text(password)?);
    if user.is_empty() {
        return Err(PlainError::InvalidCredentials);
    }
    let known = users
        .get(&user)
        .is_some_and(|p| super::equal_in_constant_time(p.as_bytes(), password.as_bytes()));
    if !known {
        return Err(PlainError::InvalidCredentials);
    }
    if !authzid.is_empty() && authzid != user {
        return Err(PlainError::AuthorizationId);
    }
    Ok(user)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_are_checked_against_the_users() {
        let users = BTreeMap::from([("alice".to_string(), "secret".to_string())]);
        assert_eq!(authenticate(b"\0alice\0secret", &users), Ok("alice".into()));
        assert_eq!(
            authenticate(b"alice\0alice\0secret", &users),
            Ok("alice".into())
        );
        assert_eq!(
            authenticate(b"\0alice\0wrong", &users),
            Err(PlainError::InvalidCredentials)
        );
        assert_eq!(
            authenticate(b"\0bob\0secret", &users),
            Err(PlainError::InvalidCredentials)
        );
        assert_eq!(
            authenticate(b"bob\0alice\0secret", &users),
            Err(PlainError::AuthorizationId)
        );
        assert_eq!(
            authenticate(b"alice", &users),
            Err(PlainError::Malformed(1))
        );
    }
}
