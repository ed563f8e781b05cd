// The account pages (register.html, login.html, welcome.html) talk to
// tern's users API with fetch: JSON in, JSON out, errors as {"error": "..."}.
// Messages are put in the page with textContent only, never innerHTML.
"use strict";

const FALLBACK_ERRORS = {
  400: "The server did not accept that request.",
  401: "Please log in.",
  409: "That username is taken.",
  415: "The request was not sent as JSON.",
  429: "Too many attempts.",
  503: "The service is unavailable just now. Please try again in a moment.",
};

// "wrong username or password" -> "Wrong username or password."
function asSentence(text) {
  const trimmed = text.trim();
  const capital = trimmed.charAt(0).toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : capital + ".";
}

// Calls the API. Resolves to {ok, status, data, error}: data is the parsed
// JSON body (or null), error a message fit to show (null when ok).
async function callApi(method, path, body) {
  const options = { method, credentials: "same-origin", headers: { "Accept": "application/json" } };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, options);
  } catch (e) {
    return { ok: false, status: 0, data: null, error: "Cannot reach the server. Check your connection and try again." };
  }
  let data = null;
  if ((response.headers.get("Content-Type") || "").toLowerCase().startsWith("application/json")) {
    try {
      data = await response.json();
    } catch (e) {
      data = null;
    }
  }
  if (response.ok) {
    return { ok: true, status: response.status, data, error: null };
  }
  let error = data && typeof data.error === "string" && data.error.trim() ? asSentence(data.error) : null;
  if (!error) {
    error = FALLBACK_ERRORS[response.status] || `Unexpected answer from the server (HTTP ${response.status}).`;
  }
  const retryAfter = response.headers.get("Retry-After");
  if (response.status === 429 && retryAfter && /^\d+$/.test(retryAfter)) {
    error += ` Try again in ${retryAfter} second${retryAfter === "1" ? "" : "s"}.`;
  }
  return { ok: false, status: response.status, data, error };
}

// Shows a message in the page's #message element: kind is "error", "ok"
// or "info"; an empty text hides it.
function showMessage(text, kind) {
  const box = document.getElementById("message");
  box.textContent = text || "";
  box.className = "message" + (kind ? " " + kind : "");
  box.hidden = !text;
}

// Wires a form: on submit, disables its button, calls onSubmit(values) and
// shows what it returns ({error} or nothing).
function handleForm(form, busyLabel, onSubmit) {
  const button = form.querySelector("button[type=submit]");
  const label = button.textContent;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const values = {
      username: form.elements.username.value.trim(),
      password: form.elements.password.value,
    };
    button.disabled = true;
    button.textContent = busyLabel;
    showMessage("", null);
    try {
      await onSubmit(values);
    } finally {
      button.disabled = false;
      button.textContent = label;
    }
  });
}
