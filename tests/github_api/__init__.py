"""A GitHub REST API on loopback for tests, checked against GitHub's OpenAPI description."""
