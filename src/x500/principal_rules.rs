//! `ssl.principal.mapping.rules`: how a client certificate's subject (RFC 2253, as
//! [`super::subject_name`] writes it) becomes its principal's name, as Kafka's
//! SslPrincipalMapper maps it. Rules are tried in order and the first that applies names
//! the principal: `DEFAULT` is the subject itself; `RULE:pattern/replacement/[LU]` applies
//! when `pattern` matches the whole subject, and answers the subject with every match of
//! `pattern` replaced (`$1`, `${name}`, `\` escapes, as Java's replaceAll reads them),
//! lower- or upper-cased when `L` or `U` follows. When no rule applies the client is not
//! authenticated.
//!
//! Patterns are compiled by `regex_automata` (RE2 syntax, like Java's regular expressions
//! for what such rules use: classes, groups, anchors, lazy and greedy repetition; not
//! backreferences or lookaround, which are refused when the rules are read).

use regex_automata::meta::Regex;
use regex_automata::util::captures::Captures;
use regex_automata::{Anchored, Input};

/// Kafka's grammar of one rule (SslPrincipalMapper's RULE_PATTERN).
const RULE: &str = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)";

/// A piece of a replacement: text as written, or a capture group's match.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Group(usize),
    Named(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        whole: Regex,
        replacement: Vec<Piece>,
        case: Case,
    },
}

/// The parsed rules of one listener.
#[derive(Debug, Clone)]
pub struct PrincipalRules {
    rules: Vec<Rule>,
    text: String,
}

impl Default for PrincipalRules {
    fn default() -> Self {
        PrincipalRules {
            rules: vec![Rule::Default],
            text: "DEFAULT".to_string(),
        }
    }
}

fn compile(pattern: &str) -> Result<Regex, String> {
    Regex::new(pattern).map_err(|e| format!("pattern `{pattern}` does not compile: {e}"))
}

/// The text of group `index` of `caps` in `haystack`, if it took part in the match.
fn group<'h>(caps: &Captures, index: usize, haystack: &'h str) -> Option<&'h str> {
    caps.get_group(index).map(|span| &haystack[span.range()])
}

impl PrincipalRules {
    /// Reads `text` as Kafka does (rules split on commas outside a rule's pattern), or
    /// answers why it cannot be served.
    pub fn parse(text: &str) -> Result<PrincipalRules, String> {
        let splitter = compile(&format!(r"\s*({RULE})\s*(,\s*|$)"))?;
        let parser = compile(RULE)?;
        let trimmed = text.trim();
        let mut rules = Vec::new();
        for caps in splitter.captures_iter(trimmed) {
            let Some(rule) = group(&caps, 1, trimmed) else {
                continue;
            };
            let mut parsed = parser.create_captures();
            parser.search_captures(&Input::new(rule).anchored(Anchored::Yes), &mut parsed);
            let end = parsed.get_match().map_or(0, |m| m.end());
            if end != rule.len() {
                return Err(format!(
                    "invalid rule `{rule}`: unmatched `{}`",
                    &rule[end..]
                ));
            }
            if parsed.get_group(1).is_some() {
                rules.push(Rule::Default);
            } else if let Some(pattern) = group(&parsed, 2, rule) {
                let replacement = group(&parsed, 4, rule).unwrap_or_default();
                let case = match group(&parsed, 6, rule) {
                    Some("L") => Case::Lower,
                    Some("U") => Case::Upper,
                    _ => Case::Keep,
                };
                let compiled = compile(pattern)?;
                let groups = compiled
                    .group_info()
                    .group_len(regex_automata::PatternID::ZERO);
                rules.push(Rule::Replace {
                    whole: compile(&format!("^(?:{pattern})$"))?,
                    replacement: replacement_pieces(replacement, groups - 1)
                        .map_err(|e| format!("invalid rule `{rule}`: {e}"))?,
                    pattern: compiled,
                    case,
                });
            }
        }
        Ok(PrincipalRules {
            rules,
            text: text.to_string(),
        })
    }

    /// The principal name of the client whose certificate subject is `subject`, or `None`
    /// when no rule applies.
    pub fn name(&self, subject: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| apply(rule, subject))
    }

    /// The rules as configured.
    pub fn text(&self) -> &str {
        &self.text
    }
}

fn apply(rule: &Rule, subject: &str) -> Option<String> {
    let Rule::Replace {
        pattern,
        whole,
        replacement,
        case,
    } = rule
    else {
        return Some(subject.to_string());
    };
    if !whole.is_match(subject) {
        return None;
    }
    let mut out = String::with_capacity(subject.len());
    let mut last = 0;
    for caps in pattern.captures_iter(subject) {
        let Some(found) = caps.get_match() else {
            continue;
        };
        out.push_str(&subject[last..found.start()]);
        for piece in replacement {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Group(index) => out.push_str(group(&caps, *index, subject).unwrap_or("")),
                Piece::Named(name) => {
                    let text = caps.get_group_by_name(name).map(|s| &subject[s.range()]);
                    out.push_str(text.unwrap_or(""));
                }
            }
        }
        last = found.end();
    }
    out.push_str(&subject[last..]);
    Some(match case {
        Case::Keep => out,
        Case::Lower => out.to_lowercase(),
        Case::Upper => out.to_uppercase(),
    })
}

/// A replacement as Java's `Matcher.appendReplacement` reads it after Kafka escaped the
/// references to groups the pattern does not have: `\c` is `c`, `${name}` a named group,
/// `$` and digits the longest group number the pattern has (a first digit above the
/// number of groups is text).
fn replacement_pieces(replacement: &str, groups: usize) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped) => text.push(escaped),
                None => return Err("a `\\` ends the replacement".to_string()),
            },
            '$' => match chars.peek().copied() {
                Some('{') => {
                    chars.next();
                    let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                    pieces.push(Piece::Named(name));
                }
                Some(d) if d.is_ascii_digit() => {
                    let mut number = d.to_digit(10).unwrap_or(0) as usize;
                    if number > groups && groups > 0 {
                        text.push('$');
                        continue;
                    }
                    if number > groups {
                        return Err(format!("`${number}` names a group the pattern lacks"));
                    }
                    chars.next();
                    while let Some(next) = chars.peek().and_then(|c| c.to_digit(10)) {
                        let longer = number * 10 + next as usize;
                        if longer > groups {
                            break;
                        }
                        number = longer;
                        chars.next();
                    }
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                    pieces.push(Piece::Group(number));
                }
                _ => return Err("a `$` names no group".to_string()),
            },
            c => text.push(c),
        }
    }
    pieces.push(Piece::Text(text));
    pieces.retain(|p| *p != Piece::Text(String::new()));
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(rules: &str, subject: &str) -> Option<String> {
        PrincipalRules::parse(rules).expect("rules").name(subject)
    }

    #[test]
    fn kafkas_documented_rules_map_as_kafka_maps_them() {
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
                     RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
                     RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\
                     DEFAULT";
        let cases = [
            (
                "CN=kafka-server1,OU=ServiceUsers,O=Org,C=US",
                "kafka-server1",
            ),
            (
                "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US",
                "duke@javasoft",
            ),
            ("OU=JavaSoft,CN=Duke.Java", "duke.java"),
            ("OU=JavaSoft,O=Sun", "OU=JavaSoft,O=Sun"),
        ];
        for (subject, want) in cases {
            assert_eq!(name(rules, subject).as_deref(), Some(want), "{subject}");
        }
        assert_eq!(
            name("RULE:^CN=(.*)$/$1/U", "CN=alice").as_deref(),
            Some("ALICE")
        );
    }

    #[test]
    fn without_a_matching_rule_there_is_no_name() {
        assert_eq!(name("RULE:^CN=(.*?),OU=A$/$1/", "CN=x,OU=B"), None);
        assert_eq!(name("", "CN=x").as_deref(), None);
        assert_eq!(name("DEFAULT", "CN=x").as_deref(), Some("CN=x"));
    }

    #[test]
    fn replacements_read_as_java_reads_them() {
        // A group the pattern lacks is text; digits run on while a group has the number.
        assert_eq!(name("RULE:^CN=(.*)$/$1$2/", "CN=a").as_deref(), Some("a$2"));
        assert_eq!(name("RULE:^CN=(.*)$/$12/", "CN=a").as_deref(), Some("a2"));
        assert_eq!(
            name(r"RULE:^CN=(?<user>[a-z]+)$/\$${user}\//", "CN=bob").as_deref(),
            Some("$bob/")
        );
        // A pattern's `/` is escaped as in Kafka; commas inside a pattern stay in it.
        assert_eq!(
            name(r"RULE:^CN=(.*)\/x,O=(.*)$/$2-$1/, DEFAULT", "CN=a/x,O=b").as_deref(),
            Some("b-a")
        );
    }

    #[test]
    fn invalid_rules_are_refused_with_the_reason() {
        for (rules, reason) in [
            ("RULE:^CN=(.*)$/$1/Lx", "unmatched `x`"),
            ("DEFAUL", "unmatched `DEFAUL`"),
            ("RULE:^CN=(.*$/$1/", "does not compile"),
            ("RULE:^CN=.*$/$1/", "names a group"),
            ("RULE:^CN=(.*)$/$x/", "names no group"),
        ] {
            let error = PrincipalRules::parse(rules).expect_err(rules);
            assert!(error.contains(reason), "{rules}: {error}");
        }
    }
}
