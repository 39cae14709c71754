// Webhooks page: editing a webhook leaves its secret field empty (the API shows it masked; an empty field
// keeps the stored secret, a new value replaces it).
import { actions, editForm } from "/console/static/console.js";

actions.editWebhook = (webhook) => editForm(document.getElementById("webhook-form"), { ...webhook, secret: "" });
