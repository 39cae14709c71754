"""Codes cannot be guessed: five codes without a right one lock every code route of the user (429 with
Retry-After), counted in the database; and a TOTP code is accepted once, by any process."""

from __future__ import annotations

import threading

import pyotp
import pytest
import requests
from sqlalchemy import update

from trellis import db as trellis_db
from trellis.testing.plugin import TEST_MASTER_KEY
from trellis_authentication import tokens as auth_tokens
from trellis_authentication.models import AuthToken
from trellis_authentication.testing import create_user_over_http

from .conftest import code_of_step, fresh_phone
from .test_authentication_twofa import PASSWORD, account, authorize, challenge, enrol_authenticator

LOCKOUT_SECONDS = int(auth_tokens.CODE_LOCKOUT.total_seconds())


@pytest.fixture()
def two_fa(api):
    api.configure(twoFa={"enabled": True}, local={"verification": {"sendEmail": False}})
    return api


def wrong_code(totp: pyotp.TOTP) -> str:
    valid = {code_of_step(totp, offset) for offset in (-1, 0, 1)}
    return next(code for code in ("000000", "111111", "222222", "333333") if code not in valid)


def assert_locked(answer) -> None:
    assert answer.status_code == 429, answer.get_json()
    assert answer.get_json()["name"] == "RATE_LIMITED"
    assert 0 < int(answer.headers["Retry-After"]) <= LOCKOUT_SECONDS


def test_disable_takes_five_wrong_codes_then_locks_even_the_right_one(two_fa):
    api = two_fa
    _, tokens = account(api)
    totp, _ = enrol_authenticator(api, tokens)
    disable = lambda code: api.post("/authentication/twoFa/disable", {"code": code}, tokens["accessToken"])  # noqa: E731
    assert [disable(wrong_code(totp)).status_code for _ in range(5)] == [401] * 5
    assert_locked(disable(code_of_step(totp)))
    assert api.me(tokens["accessToken"]).get_json()["twoFaEnabled"] is True


def test_sign_in_counts_wrong_codes_per_user_across_challenges(two_fa):
    api = two_fa
    email, tokens = account(api)
    totp, recovery = enrol_authenticator(api, tokens)
    first, second = challenge(api, email), challenge(api, email)
    assert [authorize(api, first, wrong_code(totp)).status_code for _ in range(3)] == [401] * 3
    assert [authorize(api, second, wrong_code(totp)).status_code for _ in range(2)] == [401] * 2
    assert_locked(authorize(api, challenge(api, email), code_of_step(totp)))
    assert_locked(authorize(api, challenge(api, email), recovery[0]))  # recovery codes wait as well
    disable = api.post("/authentication/twoFa/disable", {"code": code_of_step(totp)}, tokens["accessToken"])
    assert_locked(disable)  # one count for every route of the user


def test_the_lockout_ends_and_a_right_code_starts_the_count_again(two_fa, db):
    api = two_fa
    email, tokens = account(api)
    totp, _ = enrol_authenticator(api, tokens)
    for _ in range(5):
        assert authorize(api, challenge(api, email), wrong_code(totp)).status_code == 401
    assert_locked(authorize(api, challenge(api, email), code_of_step(totp)))
    # The lockout period passes.
    db.execute(update(AuthToken).where(AuthToken.kind == auth_tokens.CODE_TRIES).values(expires_at=trellis_db.utcnow()))
    db.commit()  # into the test's transaction: the next request's end would roll it back
    for _ in range(4):
        assert authorize(api, challenge(api, email), wrong_code(totp)).status_code == 401
    assert authorize(api, challenge(api, email), code_of_step(totp)).status_code == 200
    for _ in range(4):  # the right code cleared the count: four more wrong ones are not locked out
        assert authorize(api, challenge(api, email), wrong_code(totp)).status_code == 401
    assert authorize(api, challenge(api, email), code_of_step(totp, 1)).status_code == 200


def test_enrolment_locks_after_five_wrong_codes(two_fa):
    api = two_fa
    _, tokens = account(api)
    enabled = api.post("/authentication/twoFa/enable", {"method": "authenticator"}, tokens["accessToken"])
    totp = pyotp.TOTP(enabled.get_json()["secret"])
    verify = lambda code: api.post("/authentication/twoFa/verify", {"code": code}, tokens["accessToken"])  # noqa: E731
    assert [verify(wrong_code(totp)).status_code for _ in range(5)] == [401] * 5
    assert_locked(verify(code_of_step(totp)))
    assert api.me(tokens["accessToken"]).get_json()["twoFaEnabled"] is False


def test_phone_sign_in_locks_the_number_across_codes(api):
    api.configure(phone={"enabled": True})
    number = fresh_phone()
    first = api.post("/authentication/phone", {"phoneNumber": number}).get_json()["token"]
    wrong = "000000" if api.sms_code(number) != "000000" else "111111"
    answers = [api.post("/authentication/phone/verify", {"token": first, "code": wrong}) for _ in range(5)]
    assert [a.status_code for a in answers] == [401] * 5
    second = api.post("/authentication/phone", {"phoneNumber": number}).get_json()["token"]
    assert_locked(api.post("/authentication/phone/verify", {"token": second, "code": api.sms_code(number)}))


def test_phone_two_factor_codes_are_counted(two_fa):
    api = two_fa
    email, tokens = account(api)
    number = fresh_phone()
    api.post("/authentication/twoFa/enable", {"method": "phone", "phoneNumber": number}, tokens["accessToken"])
    assert (
        api.post("/authentication/twoFa/verify", {"code": api.sms_code(number)}, tokens["accessToken"]).status_code
        == 200
    )
    token = challenge(api, email)
    wrong = "000000" if api.sms_code(number) != "000000" else "111111"
    assert [authorize(api, token, wrong).status_code for _ in range(4)] == [401] * 4
    assert api.post("/authentication/twoFa/disable", {}, tokens["accessToken"]).status_code == 200  # texts a code
    assert api.post("/authentication/twoFa/disable", {"code": wrong}, tokens["accessToken"]).status_code == 401
    assert_locked(api.post("/authentication/twoFa/disable", {"code": api.sms_code(number)}, tokens["accessToken"]))


def test_an_accepted_totp_code_is_refused_the_second_time(two_fa):
    api = two_fa
    email, tokens = account(api)
    totp, _ = enrol_authenticator(api, tokens)
    enrolment_code = code_of_step(totp, -1)
    code = code_of_step(totp)
    assert authorize(api, challenge(api, email), code).status_code == 200
    again = authorize(api, challenge(api, email), code)
    assert again.status_code == 401 and "already used" in again.get_json()["message"]
    assert authorize(api, challenge(api, email), enrolment_code).status_code == 401  # the enrolment's, too
    reused = api.post("/authentication/twoFa/disable", {"code": code}, tokens["accessToken"])
    assert reused.status_code == 401
    assert (
        api.post("/authentication/twoFa/disable", {"code": code_of_step(totp, 1)}, tokens["accessToken"]).status_code
        == 200
    )


# --- two real server processes on one database ------------------------------------------------------------

ADMIN = {"masterkey": TEST_MASTER_KEY}


def sign_in(base: str, email: str) -> str:
    answer = requests.post(f"{base}/authentication/local", json={"email": email, "password": PASSWORD}, timeout=30)
    assert answer.status_code == 202, answer.text
    return answer.json()["twoFaToken"]


def authorize_at(base: str, token: str, code: str) -> requests.Response:
    return requests.post(f"{base}/authentication/twoFa/authorize", json={"twoFaToken": token, "code": code}, timeout=60)


@pytest.mark.live
def test_two_processes_share_the_count_and_accept_a_code_once(live_server_factory):
    one, other = live_server_factory(), live_server_factory()
    configured = requests.put(
        f"{one.url}/config/authentication", json={"twoFa": {"enabled": True}}, headers=ADMIN, timeout=30
    )
    assert configured.status_code == 200
    user = create_user_over_http(one.url, password=PASSWORD)
    access = requests.post(
        f"{one.url}/authentication/local", json={"email": user.email, "password": PASSWORD}, timeout=30
    ).json()["accessToken"]
    bearer = {"Authorization": f"Bearer {access}"}
    secret = requests.post(
        f"{one.url}/authentication/twoFa/enable", json={"method": "authenticator"}, headers=bearer, timeout=30
    ).json()["secret"]
    totp = pyotp.TOTP(secret)
    verified = requests.post(
        f"{other.url}/authentication/twoFa/verify", json={"code": code_of_step(totp, -1)}, headers=bearer, timeout=30
    )
    assert verified.status_code == 200, verified.text

    # The same code at both processes at once: exactly one accepts it.
    code = code_of_step(totp)
    challenges = {server.url: sign_in(server.url, user.email) for server in (one, other)}
    start = threading.Barrier(2)
    statuses: list[int] = []

    def use(base: str) -> None:
        start.wait(timeout=30)
        statuses.append(authorize_at(base, challenges[base], code).status_code)

    threads = [threading.Thread(target=use, args=(base,)) for base in challenges]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert sorted(statuses) == [200, 401]

    # A right code clears the count (whether the refused second use was counted before it or not); then
    # wrong codes at one process lock the user at the other.
    recovery = verified.json()["recoveryCodes"][0]
    assert authorize_at(one.url, sign_in(one.url, user.email), recovery).status_code == 200
    wrong = wrong_code(totp)
    assert [authorize_at(one.url, sign_in(one.url, user.email), wrong).status_code for _ in range(5)] == [401] * 5
    locked = authorize_at(other.url, sign_in(other.url, user.email), code_of_step(totp, 1))
    assert locked.status_code == 429 and 0 < int(locked.headers["Retry-After"]) <= LOCKOUT_SECONDS


def test_codes_in_other_scripts_are_wrong_codes(two_fa):
    api = two_fa
    email, tokens = account(api)
    enrol_authenticator(api, tokens)
    for code in ("１２３４５６", "12345é", "\u0663\u0661\u0664\u0661\u0665\u0669"):
        answer = authorize(api, challenge(api, email), code)
        assert answer.status_code == 401 and answer.get_json()["name"] == "UNAUTHORIZED"
