//! The subject distinguished name of an X.509 certificate, written as Java's
//! `X500Principal.getName()` writes it (RFC 2253): the principal Kafka gives a TLS client
//! that presented a certificate is `User:` and this name (`ssl.principal.mapping.rules`
//! DEFAULT). The certificate was verified by rustls already; this reads its DER just far
//! enough to find the subject, and answers `None` for anything it does not understand.
//!
//! RFC 2253 order is the reverse of the certificate's (the most specific RDN first), RDNs
//! joined by `,`, the values of a multi-valued RDN by `+`; the attribute types Java names
//! are written by name (CN, C, L, ST, O, OU, STREET, DC, UID), others as a dotted OID with
//! the value as `#` and the hex of its DER encoding.

pub mod principal_rules;

/// One DER element: its tag, and its content.
struct Element<'a> {
    tag: u8,
    content: &'a [u8],
}

/// Splits the first DER element off `input` (definite lengths only, as DER requires).
fn next(input: &[u8]) -> Option<(Element<'_>, &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let (bytes, rest) = (rest.get(..n)?, rest.get(n..)?);
            let length = bytes.iter().fold(0usize, |l, b| (l << 8) | usize::from(*b));
            (length, rest)
        }
        _ => return None,
    };
    let content = rest.get(..length)?;
    Some((Element { tag, content }, rest.get(length..)?))
}

/// Every element of a constructed element's content.
fn children(mut content: &[u8]) -> Option<Vec<Element<'_>>> {
    let mut out = Vec::new();
    while !content.is_empty() {
        let (element, rest) = next(content)?;
        out.push(element);
        content = rest;
    }
    Some(out)
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
/// `[0] EXPLICIT Version` of a TBSCertificate.
const VERSION: u8 = 0xa0;

/// The subject of the DER certificate `der`, as RFC 2253 text.
pub fn subject_name(der: &[u8]) -> Option<String> {
    let (certificate, _) = next(der)?;
    let tbs = children(certificate.content)?.into_iter().next()?;
    let mut fields = children(tbs.content)?.into_iter().peekable();
    if fields.peek()?.tag == VERSION {
        fields.next();
    }
    // serialNumber, signature, issuer, validity, then subject.
    let subject = fields.nth(4)?;
    (subject.tag == SEQUENCE).then_some(())?;
    let mut rdns = children(subject.content)?
        .into_iter()
        .map(|rdn| {
            (rdn.tag == SET).then_some(())?;
            let values = children(rdn.content)?
                .into_iter()
                .map(|pair| attribute(&pair))
                .collect::<Option<Vec<_>>>()?;
            Some(values.join("+"))
        })
        .collect::<Option<Vec<_>>>()?;
    rdns.reverse();
    Some(rdns.join(","))
}

/// One `AttributeTypeAndValue` as `TYPE=value`.
fn attribute(pair: &Element<'_>) -> Option<String> {
    (pair.tag == SEQUENCE).then_some(())?;
    let (oid, rest) = next(pair.content)?;
    (oid.tag == OID).then_some(())?;
    let (value, _) = next(rest)?;
    let dotted = dotted_oid(oid.content)?;
    let keyword = match dotted.as_str() {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => "",
    };
    match string_value(&value) {
        Some(text) if !keyword.is_empty() => Some(format!("{keyword}={}", escape(&text))),
        // The whole DER value, tag and length included, in hex.
        _ => {
            let whole = &rest[..rest.len() - next(rest)?.1.len()];
            let hex: String = whole.iter().map(|b| format!("{b:02x}")).collect();
            let name = if keyword.is_empty() { &dotted } else { keyword };
            Some(format!("{name}=#{hex}"))
        }
    }
}

/// The text of a directory string (UTF8String, PrintableString, IA5String, T61String as
/// Latin-1, BMPString as UCS-2).
fn string_value(value: &Element<'_>) -> Option<String> {
    match value.tag {
        0x0c | 0x13 | 0x16 => String::from_utf8(value.content.to_vec()).ok(),
        0x14 => Some(value.content.iter().map(|b| char::from(*b)).collect()),
        0x1e => {
            let units: Vec<u16> = value
                .content
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// A value escaped as RFC 2253 asks: `,+"\<>;` always, `#` and a space first, a space last.
fn escape(value: &str) -> String {
    let last = value.chars().count().saturating_sub(1);
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// An OBJECT IDENTIFIER's content as dotted decimal.
fn dotted_oid(content: &[u8]) -> Option<String> {
    let mut arcs = Vec::new();
    let mut value: u64 = 0;
    for &b in content {
        value = value.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            arcs.push(value);
            value = 0;
        }
    }
    let first = *arcs.first()?;
    let (a, b) = match first {
        0..=39 => (0, first),
        40..=79 => (1, first - 40),
        _ => (2, first - 80),
    };
    let mut out = format!("{a}.{b}");
    for arc in &arcs[1..] {
        out.push_str(&format!(".{arc}"));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        match content.len() {
            n @ 0..=0x7f => out.push(n as u8),
            n => {
                out.push(0x82);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
        }
        out.extend_from_slice(content);
        out
    }

    fn pair(oid: &[u8], value: Vec<u8>) -> Vec<u8> {
        der(SEQUENCE, &[der(OID, oid), value].concat())
    }

    /// A certificate skeleton with `subject` (the other fields are placeholders).
    fn certificate(subject: Vec<u8>) -> Vec<u8> {
        let tbs = [
            der(VERSION, &der(0x02, &[2])),
            der(0x02, &[1]),
            der(SEQUENCE, &[]),
            der(SEQUENCE, &[]),
            der(SEQUENCE, &[]),
            subject,
            der(SEQUENCE, &[]),
        ]
        .concat();
        der(
            SEQUENCE,
            &[der(SEQUENCE, &tbs), der(SEQUENCE, &[])].concat(),
        )
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const OU: &[u8] = &[0x55, 0x04, 0x0b];
    const C: &[u8] = &[0x55, 0x04, 0x06];
    const EMAIL: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];

    #[test]
    fn the_subject_is_written_most_specific_first_as_java_does() {
        let subject = der(
            SEQUENCE,
            &[
                der(SET, &pair(C, der(0x13, b"US"))),
                der(SET, &pair(OU, der(0x0c, b"Eng, Data"))),
                der(
                    SET,
                    &[
                        pair(CN, der(0x0c, b"client")),
                        pair(EMAIL, der(0x16, b"a@b")),
                    ]
                    .concat(),
                ),
            ]
            .concat(),
        );
        assert_eq!(
            subject_name(&certificate(subject)).as_deref(),
            Some("CN=client+1.2.840.113549.1.9.1=#1603614062,OU=Eng\\, Data,C=US")
        );
    }

    #[test]
    fn a_real_certificate_subject_is_read() {
        use rcgen::{CertificateParams, DnType, KeyPair};
        let mut params = CertificateParams::new(vec!["client".to_string()]).expect("params");
        // rcgen starts with a CN, which would stay first.
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "highwater");
        params.distinguished_name.push(DnType::CommonName, "alice");
        let key = KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        assert_eq!(
            subject_name(cert.der()).as_deref(),
            Some("CN=alice,O=highwater")
        );
    }

    #[test]
    fn escapes_and_oids_follow_rfc_2253() {
        assert_eq!(escape(" #a+b "), "\\ #a\\+b\\ ");
        assert_eq!(escape("#x"), "\\#x");
        assert_eq!(dotted_oid(EMAIL).as_deref(), Some("1.2.840.113549.1.9.1"));
    }

    #[test]
    fn what_is_not_a_certificate_has_no_subject() {
        assert_eq!(subject_name(&[]), None);
        assert_eq!(subject_name(&[0x30, 0x05, 0x30]), None);
        assert_eq!(subject_name(&der(SEQUENCE, &der(SEQUENCE, &[]))), None);
    }
}
