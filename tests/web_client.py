"""The curation page in a real headless Chromium (Selenium), run by tests/web.rs.

    python web_client.py BASE_URL TOKEN_FILE SCREENSHOT_DIR [CA_FILE]

Signs in, asks questions on the Ask page (accepted answers propose facts), then works the
review queue with the keyboard only: `a` approves the first proposal, `e` edits the next
(Tab to the object field, type, Enter). Checks the audit log page, the entity view and its
SVG neighbourhood, that a document containing <script> renders as inert text, and that
/metrics parses with prometheus_client and moves after a query. Prints one JSON line with
what it decided, for the Rust side to check through JSON-RPC, then "ALL OK".
"""

import json
import os
import shutil
import ssl
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

BASE, TOKEN_FILE, SHOTS = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
# Over https, this script's own requests trust the test CA only (and check the host name);
# the browser is told to accept the test certificate.
CA_FILE = sys.argv[4] if len(sys.argv) > 4 else None
TLS = ssl.create_default_context(cafile=CA_FILE) if CA_FILE else None
TOKEN = open(TOKEN_FILE).read().strip()
REVIEWER = "ana"
EDITED_OBJECT = "Warsaw Old Town"


def browser():
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1100"):
        options.add_argument(arg)
    if BASE.startswith("https://"):
        options.add_argument("--ignore-certificate-errors")
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    return webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)


def metric_totals():
    request = urllib.request.Request(f"{BASE}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, context=TLS) as response:
        text = response.read().decode()
    totals = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            totals[key] = sample.value
    return totals


def total(totals, name, **labels):
    return sum(v for (n, ls), v in totals.items() if n == name and all(dict(ls).get(k) == w for k, w in labels.items()))


def ask_by_api(question):
    body = json.dumps({"question": question}).encode()
    request = urllib.request.Request(
        f"{BASE}/api/ask",
        data=body,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=TLS) as response:
        return json.load(response)


def main():
    # /metrics parses as the Prometheus text format and its counters move after a query.
    before = metric_totals()
    ask_by_api("Where was Marie Curie born?")
    after = metric_totals()
    assert total(after, "a2rag_queries_total") == total(before, "a2rag_queries_total") + 1, (before, after)
    assert total(after, "a2rag_query_duration_seconds_count") > total(before, "a2rag_query_duration_seconds_count")
    assert total(after, "a2rag_requests_total", door="http", method="/api/ask", outcome="ok") >= 1
    assert total(after, "a2rag_retrieval_stage_total") >= 1
    print("metrics ok")

    driver = browser()
    # The page re-renders a view in place: an element found a moment ago may be gone by the
    # time it is read, which is a reason to look again, not a failure.
    wait = WebDriverWait(driver, 20, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
    keys = lambda *k: ActionChains(driver).send_keys(*k).perform()  # noqa: E731
    try:
        driver.get(BASE + "/")
        token = wait.until(EC.visibility_of_element_located((By.ID, "token")))
        token.send_keys("not the token", Keys.ENTER)
        wait.until(EC.text_to_be_present_in_element((By.ID, "login-error"), "Wrong token"))
        token.clear()
        token.send_keys(TOKEN, Keys.ENTER)
        wait.until(EC.visibility_of_element_located((By.ID, "nav")))
        reviewer = driver.find_element(By.ID, "reviewer")
        reviewer.clear()
        reviewer.send_keys(REVIEWER, Keys.TAB)
        print("signed in")

        # Ask on the page: the answer, its evidence and the controller trace show.
        driver.get(BASE + "/#/ask")
        question = wait.until(EC.visibility_of_element_located((By.ID, "question")))
        question.send_keys("Where was Marie Curie born?", Keys.ENTER)
        answer = wait.until(EC.visibility_of_element_located((By.ID, "answer")))
        assert answer.text == "Warsaw", answer.text
        page = driver.find_element(By.ID, "result").text
        assert "Controller trace" in page and "Ledger" in page and "Evidence" in page, page
        print("asked:", answer.text)

        # Untrusted chunk text renders as text, in the evidence and in the entity view.
        question = driver.find_element(By.ID, "question")
        question.clear()
        question.send_keys("Who founded Script Works?", Keys.ENTER)
        wait.until(EC.text_to_be_present_in_element((By.ID, "result"), "Evidence"))
        result = driver.find_element(By.ID, "result")
        assert "<script>" in result.text, result.text
        assert driver.find_elements(By.CSS_SELECTOR, "#result script, #result img") == []
        driver.get(BASE + "/#/entity?name=Mallory%20Quill")
        wait.until(EC.presence_of_element_located((By.ID, "neighbourhood")))
        view = driver.find_element(By.ID, "entity-view")
        assert "<script>" in view.text and "onerror" in view.text, view.text
        assert driver.find_elements(By.CSS_SELECTOR, "#entity-view script, #entity-view img") == []
        assert driver.execute_script("return window.__pwned === undefined"), "an ingested script ran"
        print("untrusted text is inert")

        # The review loop, keyboard only.
        driver.get(BASE + "/#/review")
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#queue .proposal")))
        cards = driver.find_elements(By.CSS_SELECTOR, "#queue .proposal")
        assert len(cards) >= 2, f"{len(cards)} proposals"
        first, second = cards[0].get_attribute("data-id"), cards[1].get_attribute("data-id")
        assert "selected" in cards[0].get_attribute("class")
        driver.save_screenshot(os.path.join(SHOTS, "review-queue.png"))
        count = len(cards)

        def queue_is(n):
            return lambda d: len(d.find_elements(By.CSS_SELECTOR, "#queue .proposal")) == n

        keys("a")
        wait.until(queue_is(count - 1))
        selected = driver.find_element(By.CSS_SELECTOR, "#queue .proposal.selected")
        assert selected.get_attribute("data-id") == second
        # j moves down and k back up before the edit.
        if count > 2:
            keys("j")
            assert driver.find_element(By.CSS_SELECTOR, "#queue .proposal.selected").get_attribute("data-id") != second
            keys("k")
        keys("e")
        subject = wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, ".proposal.selected form.edit input[name=subject]")))
        assert driver.switch_to.active_element == subject
        original = {f: driver.find_element(By.CSS_SELECTOR, f".proposal.selected input[name={f}]").get_attribute("value")
                    for f in ("subject", "relation", "object")}
        keys(Keys.TAB, Keys.TAB)
        obj = driver.switch_to.active_element
        assert obj.get_attribute("name") == "object", obj.get_attribute("name")
        ActionChains(driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).perform()
        keys(EDITED_OBJECT, Keys.ENTER)
        wait.until(queue_is(count - 2))
        print("approved", first, "edited", second)

        # The audit log shows both decisions, newest first, with the reviewer.
        driver.get(BASE + f"/#/audit?who={REVIEWER}")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#audit tbody tr")) == 2)
        rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#audit tbody tr")]
        assert REVIEWER in rows[0] and "edit" in rows[0] and EDITED_OBJECT in rows[0], rows
        assert "approve" in rows[1], rows
        driver.get(BASE + f"/#/audit?who={REVIEWER}&action=approve")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#audit tbody tr")) == 1)

        # The entity view of what the edit added: aliases, edges, the drawn neighbourhood.
        driver.get(BASE + "/#/entity")
        search = wait.until(EC.visibility_of_element_located((By.ID, "entity-search")))
        search.send_keys(original["subject"], Keys.ENTER)
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#neighbourhood g.node")))
        edges = driver.find_element(By.ID, "edges").text
        assert EDITED_OBJECT in edges, edges
        # A neighbour is a link to its own view; the screenshot shows a busier entity.
        driver.get(BASE + "/#/entity?name=Aurora%20Observatory")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#neighbourhood g.node")) >= 4)
        driver.find_element(By.CSS_SELECTOR, "#neighbourhood g.node:not(.center) circle").click()
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#entity-view h2").text != "Aurora Observatory")
        driver.back()
        wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#entity-view h2"), "Aurora Observatory"))
        driver.save_screenshot(os.path.join(SHOTS, "entity-view.png"))
        print("entity view ok")
    finally:
        driver.quit()

    print(json.dumps({
        "approved": int(first),
        "edited": int(second),
        "triple": {"subject": original["subject"], "relation": original["relation"], "object": EDITED_OBJECT},
        "reviewer": REVIEWER,
    }))
    print("ALL OK")


if __name__ == "__main__":
    main()
