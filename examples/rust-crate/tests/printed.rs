//! Runs the built binary and checks what it printed: a miscompiled variadic call
//! (Cranelift on aarch64-apple-darwin) prints wrong numbers rather than crashing.

use std::process::Command;

#[test]
fn binary_prints_every_variadic_argument() {
    let output = Command::new(env!("CARGO_BIN_EXE_variadic-demo"))
        .output()
        .expect("run variadic-demo");
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "origin=(0, -7) r=2.25\n"
    );
}
