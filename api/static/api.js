/* The dashboards' calls to /v1: an API key when the server asks for one, problem+json errors.

   The pages and their assets are public; the data comes from /v1, which needs a key when
   BROKER_AUTH=required (api/auth.py: `Authorization: Bearer KEY`). The key is typed into the
   page's key form, kept in sessionStorage (this tab only, gone when it closes) and sent as that
   header on every call; never in a URL. A 401 or 403 shows the form with what the server said. */
(function () {
  "use strict";

  const STORE = "placement-broker.api-key";
  const $ = (sel) => document.querySelector(sel);
  let reload = null;

  function storedKey() {
    try {
      return sessionStorage.getItem(STORE) || "";
    } catch (e) {
      return ""; // storage disabled: the key lasts as long as the page
    }
  }

  let memoryKey = storedKey();

  function setKey(key) {
    memoryKey = key;
    try {
      if (key) sessionStorage.setItem(STORE, key);
      else sessionStorage.removeItem(STORE);
    } catch (e) {
      /* kept in memory only */
    }
    $("#auth-forget").hidden = !key;
  }

  class ApiError extends Error {
    constructor(status, detail, what, keySent) {
      super(detail ? `${what}: ${detail}` : `${what}: HTTP ${status}`);
      this.status = status;
      this.detail = detail;
      this.what = what;
      this.keySent = keySent;
    }
  }

  /* GET a /v1 path as JSON; an answer that is not 2xx throws an ApiError carrying the problem
     document's `detail` (`what` names the data in messages: "the simulations"). */
  async function getJson(path, what) {
    const headers = { Accept: "application/json" };
    if (memoryKey) headers.Authorization = "Bearer " + memoryKey;
    const resp = await fetch(path, { headers, cache: "no-store" });
    if (resp.ok) return resp.json();
    let doc = null;
    try {
      doc = await resp.json();
    } catch (e) {
      /* not JSON: a proxy's error page */
    }
    // the problem's detail, then each field it names ("from: 'from' must be before 'to'")
    const fields = ((doc && doc.errors) || []).map((e) => `${(e.loc || []).slice(1).join(".")}: ${e.msg}`);
    const detail = doc && typeof doc.detail === "string" ? [doc.detail, ...fields].join("; ") : resp.statusText;
    throw new ApiError(resp.status, detail, what, Boolean(memoryKey));
  }

  /* Show the key form for a 401/403 (then true: the page waits for a key), else false. */
  function askForKey(err) {
    if (!(err instanceof ApiError) || (err.status !== 401 && err.status !== 403)) return false;
    let say;
    if (err.status === 403) {
      say = `This key may not read ${err.what}: ${err.detail}. Enter another key.`;
    } else if (err.keySent) {
      say = `The server refused this API key: ${err.detail}. Enter another key.`;
    } else {
      say = `This server requires an API key to read ${err.what} (${err.detail}). ` +
        "Enter one below: it is kept in this browser tab only and sent as an Authorization header.";
    }
    $("#auth-msg").textContent = say;
    $("#auth").hidden = false;
    document.body.dataset.state = "auth";
    $("#auth-key").focus();
    return true;
  }

  function hideKeyForm() {
    $("#auth").hidden = true;
  }

  /* The page's load(): called again once a key is entered or forgotten. */
  function onKey(load) {
    reload = load;
  }

  $("#auth-form").addEventListener("submit", (ev) => {
    ev.preventDefault(); // the key goes to sessionStorage, never into a URL
    const input = $("#auth-key");
    const key = input.value.trim();
    input.value = "";
    if (!key) return;
    setKey(key);
    hideKeyForm();
    if (reload) reload();
  });
  $("#auth-forget").addEventListener("click", () => {
    setKey("");
    if (reload) reload();
  });
  $("#auth-forget").hidden = !memoryKey;

  window.brokerApi = { getJson, askForKey, hideKeyForm, onKey, ApiError };
})();
