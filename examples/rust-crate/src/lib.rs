//! Formats text through libc's `snprintf`, a variadic C function.
//!
//! Variadic calls are what rustc_codegen_cranelift gets wrong on aarch64-apple-darwin
//! (rust-lang/rustc_codegen_cranelift#1451): Apple's arm64 ABI passes variadic arguments on
//! the stack, and a miscompiled call prints garbage instead of failing to build. The tests
//! compare the printed text, so a silent miscompile shows up as a test failure.

use core::ffi::{c_char, c_double, c_int, CStr};

extern "C" {
    fn snprintf(buf: *mut c_char, size: usize, format: *const c_char, ...) -> c_int;
}

/// Formats a labelled point as `label=(x, y) r=radius` using C's `snprintf`.
///
/// Mixes integer, pointer and floating-point variadic arguments: Cranelift's padding
/// workaround (rustc_codegen_cranelift PR #1500) covers only the first two kinds.
pub fn describe_point(label: &CStr, x: i32, y: i32, radius: f64) -> String {
    let mut buf = [0 as c_char; 64];
    // SAFETY: the format string is NUL-terminated and its conversions (%s, %d, %d, %.2f)
    // match the argument types; snprintf never writes more than `buf.len()` bytes.
    let written = unsafe {
        snprintf(
            buf.as_mut_ptr(),
            buf.len(),
            c"%s=(%d, %d) r=%.2f".as_ptr(),
            label.as_ptr(),
            x as c_int,
            y as c_int,
            radius as c_double,
        )
    };
    assert!(written >= 0, "snprintf failed");
    // SAFETY: snprintf always NUL-terminates within `buf` when the size is non-zero.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) };
    text.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::describe_point;

    #[test]
    fn formats_every_argument_kind() {
        assert_eq!(describe_point(c"p", -3, 42, 1.5), "p=(-3, 42) r=1.50");
    }

    #[test]
    fn truncates_instead_of_overflowing() {
        let long = c"a-label-long-enough-to-fill-the-sixty-four-byte-buffer-completely";
        assert_eq!(describe_point(long, 1, 2, 3.0).len(), 63);
    }
}
