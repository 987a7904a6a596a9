//! SASL/PLAIN (RFC 4616) as Kafka's broker serves it: the users and passwords come from the
//! listener's JAAS config (`listener.name.<l>.plain.sasl.jaas.config`, Kafka's
//! PlainLoginModule with `user_<name>="<password>"` options), and a client's single message
//! `authzid NUL authcid NUL passwd` is checked against them.

use std::collections::BTreeMap;

/// Why a PLAIN message or a JAAS config is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    #[error("Authentication failed: Invalid username or password")]
    InvalidCredentials,
    #[error("Authentication failed: Client requested an authorization id that is different from username")]
    AuthorizationId,
    #[error("Invalid SASL/PLAIN response: expected 3 tokens, got {0}")]
    Malformed(usize),
}

/// One JAAS login module entry: its class, control flag and options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub module: String,
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

/// Parses a JAAS config value as Kafka's `sasl.jaas.config` takes it: `Class flag
/// key="value" key=value …;` (one module). Quoted values may hold `\"` and `\\`.
pub fn parse_jaas(text: &str) -> Result<JaasEntry, String> {
    let text = text.trim();
    let body = text
        .strip_suffix(';')
        .ok_or("a JAAS config ends with ';'")?
        .trim();
    let mut chars = body.chars().peekable();
    let word = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| -> String {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut w = String::new();
        while let Some(c) = chars.peek().copied().filter(|c| !c.is_whitespace()) {
            w.push(c);
            chars.next();
        }
        w
    };
    let module = word(&mut chars);
    let flag = word(&mut chars);
    if module.is_empty()
        || !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str())
    {
        return Err("a JAAS config is `LoginModuleClass required key=\"value\" …;`".into());
    }
    let mut options = BTreeMap::new();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        if chars.next() != Some('=') || key.is_empty() {
            return Err(format!("JAAS option {key:?} has no value"));
        }
        let value = match chars.peek() {
            Some('"') => {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some('\\') => value.extend(chars.next()),
                        Some('"') => break,
                        Some(c) => value.push(c),
                        None => return Err(format!("JAAS option {key} has an unclosed quote")),
                    }
                }
                value
            }
            _ => word(&mut chars),
        };
        options.insert(key, value);
    }
    Ok(JaasEntry {
        module,
        flag,
        options,
    })
}

/// The users of a PlainLoginModule entry: its `user_<name>` options.
pub fn users(entry: &JaasEntry) -> BTreeMap<String, String> {
    entry
        .options
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("user_").map(|u| (u.to_string(), v.clone())))
        .collect()
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
    fn a_plain_login_module_lists_its_users() {
        let entry = parse_jaas(
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\" \
             user_alice=\"a \\\"quoted\\\" pass\";",
        )
        .expect("jaas");
        assert_eq!(entry.flag, "required");
        assert_eq!(entry.options["username"], "admin");
        let users = users(&entry);
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "a \"quoted\" pass");
        assert!(
            parse_jaas("Module required user_a=\"x\"").is_err(),
            "no ';'"
        );
        assert!(parse_jaas("Module maybe;").is_err(), "flag");
        assert!(
            parse_jaas("Module required user_a=\"x;").is_err(),
            "unclosed"
        );
    }

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
