"""Email test helpers: a local HTTP server that speaks the parts of Mailgun's and SendGrid's APIs we use.

The fake keeps state like the real services (templates, versions, paging) and records every request so
tests can check authentication headers and payloads. It runs on 127.0.0.1 in a thread; the module
reaches it through the providers' configurable ``baseUrl``.
"""

from __future__ import annotations

import base64
import json
import ssl
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from trellis.testing.fake_servers import Served, serve_wsgi

MAILGUN_KEY = "key-mailgun-test-123"
MAILGUN_DOMAIN = "mg.example.com"
SENDGRID_KEY = "SG.sendgrid-test-456"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    form: dict[str, str]
    json: Any


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(data), status=status, mimetype="application/json", headers=headers)


class FakeProviders:
    """Mailgun under ``/mailgun/v3``, SendGrid under ``/sendgrid/v3``."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.mailgun_templates: dict[str, dict[str, Any]] = {}
        self.mailgun_messages: list[dict[str, str]] = []
        self.sendgrid_templates: dict[str, dict[str, Any]] = {}
        self.sendgrid_messages: list[dict[str, Any]] = []
        self.page_size_cap = 100  # lower it to make the client follow paging links
        self.override: tuple[int, str, str] | None = None  # (status, content type, body) for every answer
        self.base = ""
        self.urls = Map(
            [
                Rule("/mailgun/v3/<domain>/messages", methods=["POST"], endpoint="mg_send"),
                Rule("/mailgun/v3/<domain>/templates", methods=["GET"], endpoint="mg_list"),
                Rule("/mailgun/v3/<domain>/templates", methods=["POST"], endpoint="mg_create"),
                Rule("/mailgun/v3/<domain>/templates/<name>", methods=["GET"], endpoint="mg_get"),
                Rule("/mailgun/v3/<domain>/templates/<name>/versions", methods=["POST"], endpoint="mg_add_version"),
                Rule(
                    "/mailgun/v3/<domain>/templates/<name>/versions/<tag>", methods=["PUT"], endpoint="mg_put_version"
                ),
                Rule("/sendgrid/v3/mail/send", methods=["POST"], endpoint="sg_send"),
                Rule("/sendgrid/v3/templates", methods=["GET"], endpoint="sg_list"),
                Rule("/sendgrid/v3/templates", methods=["POST"], endpoint="sg_create"),
                Rule("/sendgrid/v3/templates/<tid>", methods=["GET"], endpoint="sg_get"),
                Rule("/sendgrid/v3/templates/<tid>", methods=["PATCH"], endpoint="sg_patch"),
                Rule("/sendgrid/v3/templates/<tid>/versions", methods=["POST"], endpoint="sg_add_version"),
                Rule("/sendgrid/v3/templates/<tid>/versions/<vid>", methods=["PATCH"], endpoint="sg_patch_version"),
            ]
        )

    # --- plumbing ---------------------------------------------------------------------------------
    def __call__(self, environ: dict, start_response: Callable) -> Any:
        request = Request(environ)
        payload = request.get_json(silent=True) if request.is_json else None
        self.requests.append(
            Recorded(
                request.method, request.path, dict(request.args), dict(request.headers), dict(request.form), payload
            )
        )
        if self.override is not None:
            status, mimetype, text = self.override
            return Response(text, status=status, mimetype=mimetype)(environ, start_response)
        try:
            endpoint, values = self.urls.bind_to_environ(environ).match()
            if endpoint.startswith("mg_"):
                response = self._mailgun_auth(request) or getattr(self, endpoint)(request, **values)
            else:
                response = self._sendgrid_auth(request) or getattr(self, endpoint)(request, **values)
        except HTTPException as exc:
            response = _json({"message": exc.description}, exc.code or 500)
        return response(environ, start_response)

    def last(self, method: str, path_end: str) -> Recorded:
        return next(r for r in reversed(self.requests) if r.method == method and r.path.endswith(path_end))

    # --- Mailgun ----------------------------------------------------------------------------------
    def _mailgun_auth(self, request: Request) -> Response | None:
        expected = "Basic " + base64.b64encode(f"api:{MAILGUN_KEY}".encode()).decode()
        if request.headers.get("Authorization") != expected:
            return Response("Forbidden", status=401)
        return None

    def _mg_domain(self, domain: str) -> None:
        if domain != MAILGUN_DOMAIN:
            raise NotFound("Domain not found")

    def mg_send(self, request: Request, domain: str) -> Response:
        self._mg_domain(domain)
        form = request.form
        if not all(form.get(key) for key in ("from", "to", "subject")) or not (form.get("html") or form.get("text")):
            return _json({"message": "from, to, subject and text or html are required"}, 400)
        message_id = f"<{uuid.uuid4().hex}@{domain}>"
        self.mailgun_messages.append({**form.to_dict(), "id": message_id})
        return _json({"id": message_id, "message": "Queued. Thank you."})

    def mg_list(self, request: Request, domain: str) -> Response:
        self._mg_domain(domain)
        limit = min(int(request.args.get("limit", 10)), self.page_size_cap)
        names = list(self.mailgun_templates)
        start = 0
        if request.args.get("page") == "next" and request.args.get("p") in names:
            start = names.index(request.args["p"]) + 1
        chunk = names[start : start + limit]
        items = [{k: v for k, v in self.mailgun_templates[n].items() if k not in ("versions", "active")} for n in chunk]
        pivot = chunk[-1] if chunk else request.args.get("p", "")
        root = f"{self.base}/mailgun/v3/{domain}/templates"
        return _json(
            {
                "items": items,
                "paging": {
                    "first": f"{root}?limit={limit}",
                    "last": f"{root}?page=last&limit={limit}",
                    "next": f"{root}?page=next&p={pivot}&limit={limit}",
                    "previous": f"{root}?page=prev&p={chunk[0] if chunk else ''}&limit={limit}",
                },
            }
        )

    def _mg_version(self, request: Request, tag: str) -> dict[str, Any]:
        headers = request.form.get("headers")
        return {
            "tag": tag,
            "template": request.form["template"],
            "engine": "handlebars",
            "headers": json.loads(headers) if headers else {},
            "createdAt": "Wed, 29 Aug 2018 23:31:15 UTC",
        }

    def mg_create(self, request: Request, domain: str) -> Response:
        self._mg_domain(domain)
        name = (request.form.get("name") or "").lower()
        if not name:
            return _json({"message": "name is required"}, 400)
        if name in self.mailgun_templates:
            return _json({"message": f"template {name} already exists"}, 409)
        template = {
            "name": name,
            "description": request.form.get("description", ""),
            "createdAt": "now",
            "versions": {},
        }
        answer: dict[str, Any] = {k: v for k, v in template.items() if k != "versions"}
        if request.form.get("template"):
            version = self._mg_version(request, request.form.get("tag") or "initial")
            template["versions"][version["tag"]] = version
            template["active"] = version["tag"]
            answer["version"] = {k: v for k, v in version.items() if k != "template"}
        self.mailgun_templates[name] = template
        return _json({"template": answer, "message": "template has been stored"})

    def mg_get(self, request: Request, domain: str, name: str) -> Response:
        self._mg_domain(domain)
        template = self.mailgun_templates.get(name)
        if template is None:
            raise NotFound("template not found")
        answer = {k: v for k, v in template.items() if k not in ("versions", "active")}
        if request.args.get("active") == "yes" and template.get("active"):
            answer["version"] = dict(template["versions"][template["active"]], active=True)
        return _json({"template": answer})

    def mg_add_version(self, request: Request, domain: str, name: str) -> Response:
        self._mg_domain(domain)
        template = self.mailgun_templates.get(name)
        if template is None:
            raise NotFound("template not found")
        tag = request.form.get("tag")
        if not tag or not request.form.get("template"):
            return _json({"message": "template and tag are required"}, 400)
        if tag in template["versions"]:
            return _json({"message": f"version {tag} already exists"}, 409)
        template["versions"][tag] = self._mg_version(request, tag)
        if request.form.get("active") == "yes" or not template.get("active"):
            template["active"] = tag
        return _json(
            {
                "template": {"name": name, "version": {"tag": tag}},
                "message": "new version of the template has been stored",
            }
        )

    def mg_put_version(self, request: Request, domain: str, name: str, tag: str) -> Response:
        self._mg_domain(domain)
        template = self.mailgun_templates.get(name)
        if template is None or tag not in template["versions"]:
            raise NotFound("template or version not found")
        version = template["versions"][tag]
        if "template" in request.form:
            version["template"] = request.form["template"]
        if "headers" in request.form:
            version["headers"] = json.loads(request.form["headers"])
        if request.form.get("active") == "yes":
            template["active"] = tag
        return _json({"template": {"name": name, "version": {"tag": tag}}, "message": "version has been updated"})

    def add_mailgun_template(self, name: str, body: str, subject: str | None = None) -> None:
        """Seed a template as if made in Mailgun's own UI."""
        headers = {"Subject": subject} if subject else {}
        version = {"tag": "initial", "template": body, "engine": "handlebars", "headers": headers, "createdAt": "x"}
        self.mailgun_templates[name] = {
            "name": name,
            "description": "",
            "createdAt": "x",
            "versions": {"initial": version},
            "active": "initial",
        }

    # --- SendGrid ---------------------------------------------------------------------------------
    def _sendgrid_auth(self, request: Request) -> Response | None:
        if request.headers.get("Authorization") != f"Bearer {SENDGRID_KEY}":
            return _json(
                {
                    "errors": [
                        {"field": None, "message": "The provided authorization grant is invalid, expired, or revoked"}
                    ]
                },
                401,
            )
        return None

    def _sg_template(self, tid: str) -> dict[str, Any]:
        template = self.sendgrid_templates.get(tid)
        if template is None:
            raise NotFound("Not found")
        return template

    def sg_send(self, request: Request) -> Response:
        body = request.get_json(silent=True) or {}
        errors = []
        if not body.get("personalizations") or not body["personalizations"][0].get("to"):
            errors.append({"field": "personalizations", "message": "The personalizations field is required"})
        if not (body.get("from") or {}).get("email"):
            errors.append({"field": "from.email", "message": "The from email is required"})
        content = body.get("content") or []
        if not content or content[0].get("type") != "text/plain" and len(content) > 1:
            errors.append({"field": "content", "message": "text/plain must come first"})
        if errors:
            return _json({"errors": errors}, 400)
        message_id = uuid.uuid4().hex[:22]
        self.sendgrid_messages.append({**body, "id": message_id})
        return Response(status=202, headers={"X-Message-Id": message_id})

    def sg_list(self, request: Request) -> Response:
        size = min(int(request.args.get("page_size", 10)), self.page_size_cap)
        ids = list(self.sendgrid_templates)
        start = ids.index(request.args["page_token"]) if request.args.get("page_token") in ids else 0
        chunk = ids[start : start + size]
        result = []
        for tid in chunk:
            template = self.sendgrid_templates[tid]
            versions = [{k: v for k, v in ver.items() if k != "html_content"} for ver in template["versions"]]
            result.append({**template, "versions": versions})
        metadata: dict[str, Any] = {"count": len(ids), "self": f"{self.base}/sendgrid/v3/templates?page_size={size}"}
        if start + size < len(ids):
            metadata["next"] = f"{self.base}/sendgrid/v3/templates?page_size={size}&page_token={ids[start + size]}"
        return _json({"result": result, "_metadata": metadata})

    def sg_create(self, request: Request) -> Response:
        body = request.get_json(silent=True) or {}
        if not body.get("name"):
            return _json({"errors": [{"field": "name", "message": "name is required"}]}, 400)
        tid = f"d-{uuid.uuid4().hex}"
        self.sendgrid_templates[tid] = {
            "id": tid,
            "name": body["name"],
            "generation": body.get("generation", "legacy"),
            "updated_at": "now",
            "versions": [],
        }
        return _json(self.sendgrid_templates[tid], 201)

    def sg_get(self, request: Request, tid: str) -> Response:
        return _json(self._sg_template(tid))

    def sg_patch(self, request: Request, tid: str) -> Response:
        template = self._sg_template(tid)
        template["name"] = (request.get_json(silent=True) or {}).get("name", template["name"])
        return _json(template)

    def _sg_activate(self, template: dict[str, Any], version: dict[str, Any]) -> None:
        if version.get("active") == 1:
            for other in template["versions"]:
                if other is not version:
                    other["active"] = 0

    def sg_add_version(self, request: Request, tid: str) -> Response:
        template = self._sg_template(tid)
        body = request.get_json(silent=True) or {}
        if not body.get("name") or not body.get("subject"):
            return _json({"errors": [{"field": "subject", "message": "name and subject are required"}]}, 400)
        version = {
            "id": uuid.uuid4().hex,
            "template_id": tid,
            "active": 1 if body.get("active") == 1 else 0,
            "name": body["name"],
            "subject": body["subject"],
            "html_content": body.get("html_content", ""),
            "updated_at": "now",
        }
        template["versions"].append(version)
        self._sg_activate(template, version)
        return _json(version, 201)

    def sg_patch_version(self, request: Request, tid: str, vid: str) -> Response:
        template = self._sg_template(tid)
        version = next((v for v in template["versions"] if v["id"] == vid), None)
        if version is None:
            raise NotFound("Not found")
        body = request.get_json(silent=True) or {}
        for key in ("name", "subject", "html_content", "active"):
            if key in body:
                version[key] = body[key]
        self._sg_activate(template, version)
        return _json(version)

    def add_sendgrid_template(self, name: str, body: str, subject: str) -> str:
        """Seed a dynamic template as if made in SendGrid's own UI; returns its id."""
        tid = f"d-{uuid.uuid4().hex}"
        version = {
            "id": uuid.uuid4().hex,
            "template_id": tid,
            "active": 1,
            "name": "v1",
            "subject": subject,
            "html_content": body,
            "updated_at": "x",
        }
        self.sendgrid_templates[tid] = {
            "id": tid,
            "name": name,
            "generation": "dynamic",
            "updated_at": "x",
            "versions": [version],
        }
        return tid


@dataclass
class ProviderAPI:
    fake: FakeProviders
    base: str
    server: Served

    mailgun_key = MAILGUN_KEY
    mailgun_domain = MAILGUN_DOMAIN
    sendgrid_key = SENDGRID_KEY

    @property
    def mailgun_url(self) -> str:
        return f"{self.base}/mailgun/v3"

    @property
    def sendgrid_url(self) -> str:
        return f"{self.base}/sendgrid/v3"


@pytest.fixture()
def provider_api() -> Iterator[ProviderAPI]:
    fake = FakeProviders()
    with serve_wsgi(fake) as served:
        fake.base = served.url
        yield ProviderAPI(fake, served.url, served)


@pytest.fixture()
def configure_email(client, admin_headers) -> Callable[..., dict[str, Any]]:
    """PUT /admin/email/config and return the answer (asserting it was accepted)."""

    def put(**changes: Any) -> dict[str, Any]:
        response = client.put("/admin/email/config", json=changes, headers=admin_headers)
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    return put


@pytest.fixture()
def use_mailgun(configure_email, provider_api) -> ProviderAPI:
    configure_email(
        provider="mailgun",
        mailgun={"apiKey": MAILGUN_KEY, "domain": MAILGUN_DOMAIN, "baseUrl": provider_api.mailgun_url},
    )
    return provider_api


@pytest.fixture()
def use_sendgrid(configure_email, provider_api) -> ProviderAPI:
    configure_email(provider="sendgrid", sendgrid={"apiKey": SENDGRID_KEY, "baseUrl": provider_api.sendgrid_url})
    return provider_api


@dataclass
class PrivateCA:
    ca_file: str  # PEM of the CA, for SSL_CERT_FILE
    server_context: ssl.SSLContext  # a server context with a certificate for 127.0.0.1 signed by it


@pytest.fixture()
def private_ca(tmp_path) -> PrivateCA:
    import trustme

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return PrivateCA(str(ca_file), context)
