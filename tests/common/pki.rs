//! A certificate authority made by a test (rcgen), and the certificates it signs, as PEM.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// A certificate authority and what it signed, as PEM.
pub struct Pki {
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

impl Pki {
    pub fn new() -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "highwater test CA");
        let ca_key = KeyPair::generate().expect("key");
        let ca = params.self_signed(&ca_key).expect("ca");
        Pki { ca, ca_key }
    }

    /// A certificate for `names` (DNS names or IP addresses) and its key, both PEM.
    pub fn issue(&self, names: &[&str], common_name: &str) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        self.sign(params)
    }

    /// The certificate `params` describe, signed by this CA, and its key, both PEM.
    pub fn sign(&self, params: CertificateParams) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .expect("sign");
        (cert.pem(), key.serialize_pem())
    }

    /// A client certificate whose subject is `O=<organization>` then `CN=<common_name>`
    /// (written `CN=..,O=..` as RFC 2253 orders it), and its key, both PEM.
    pub fn issue_person(&self, organization: &str, common_name: &str) -> (String, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        // rcgen starts with a CN, which would stay first.
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, organization);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        self.sign(params)
    }

    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }
}
