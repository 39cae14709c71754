"""The default argon2 profile (OWASP's argon2id recommendation) and re-hashing of older hashes."""

from argon2 import PasswordHasher, profiles

from trellis import passwords


def test_default_profile_is_owasp_argon2id_and_older_hashes_verify():
    previous = passwords._current.profile
    passwords.configure("default")
    try:
        made = passwords.hash_password("correct horse")
        assert made.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
        assert passwords.verify_password(made, "correct horse") and not passwords.needs_rehash(made)
        older = PasswordHasher.from_parameters(profiles.RFC_9106_LOW_MEMORY).hash("correct horse")
        assert passwords.verify_password(older, "correct horse") and passwords.needs_rehash(older)
        assert not passwords.verify_password(made, "wrong horse")
    finally:
        passwords.configure(previous)
