//! Link options for the `highwater` binary.
//!
//! On GNU/Linux the binary's relative relocations are packed (`DT_RELR`, glibc 2.36 and
//! binutils 2.38 or later; older linkers ignore the option with a warning). A
//! position-independent executable otherwise carries ~450 KiB of `.rela.dyn` that the
//! dynamic loader reads in full at every start: a tenth of the idle RSS of `highwater dev`
//! (issue 14).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
