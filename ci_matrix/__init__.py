"""ci-matrix: build matrices with known-safe workarounds, and diagnosis of known build failures."""

__version__ = "0.1.0"
