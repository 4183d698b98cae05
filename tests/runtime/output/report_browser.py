#!/usr/bin/python3
"""A comparison's report.html, opened in headless Chromium (Debian's) over
the DevTools protocol: no console message or page error, no network request
but the page itself, one series per variant in each chart with as many points
as the run's CSV files hold, and a screenshot that is not blank. Its
controls: the log scale and the train loss smoothing each show one view of
the charts they switch, every point where the CSV files put it; and the
summary table fits a printed page's width (where on screen it scrolls). Then the
same for a comparison over seeds ("seeds"): each chart has one mean series
and one band per variant, their points the mean and mean ± sample standard
deviation of the seeds' CSV files, row by row.

Before trusting it, the same checks run on a canary page that logs an error,
fetches an image over the network and is blank: each check must catch it.
If the browser cannot run, the test says so and FAILS.

Usage: report_browser.py SOURCE_DIR BUILD_DIR
"""
import base64
import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import websocket  # Debian's python3-websocket
    from PIL import Image  # Debian's python3-pil
except ImportError as e:
    sys.exit(f"FAILED: {e}: install python3-websocket and python3-pil (tools/dev deps)")

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                  "--remote-debugging-port=0", "--remote-allow-origins=*"]

VARIANTS = ["ddp", "diloco", "sparta"]
OPTIMIZER = {"name": "adamw", "lr": 1e-3}
MANIFEST = {
    "name": "browser", "seed": 3, "nodes": 2, "threads": 1,
    "model": {"plugin": "mlp", "options": {"hidden": [32]}},
    "strategy": {"plugin": "allreduce", "options": {"optimizer": OPTIMIZER, "max_norm": 1.0}},
    "data": {"train": {"dataset": "mnist", "path": "", "split": "train"},
             "val": {"dataset": "mnist", "path": "", "split": "test"}},
    "train": {"max_steps": 30, "batch_size": 16},
    "eval": {"interval": 10, "size": 128},
    "output": {"dir": ""},
    "runs": [{"name": "ddp"},
             {"name": "diloco", "strategy": {"plugin": "diloco", "options": {"H": 5, "optimizer": OPTIMIZER}}},
             {"name": "sparta", "strategy": {"plugin": "sparta", "options": {"p": 0.05, "optimizer": OPTIMIZER}}}],
}

# Whether the summary table fits its box, nothing of it cut or scrolled away.
TABLE_FITS_JS = """(() => { const wrap = document.querySelector('.table-wrap');
  const table = wrap.querySelector('table.summary');
  return wrap.scrollWidth <= wrap.clientWidth &&
         table.getBoundingClientRect().right <= document.documentElement.clientWidth; })()"""

SEEDS = [1, 2, 3]
SEEDED_VARIANTS = ["ddp", "diloco"]

# Read from the live page: every line chart shown (a chart's other views,
# chosen with the page's controls, are not), its series, its bands and their
# points.
CHARTS_JS = """JSON.stringify([...document.querySelectorAll('svg.line-chart')].filter(svg =>
    svg.getClientRects().length > 0).map(svg => ({
  id: svg.id,
  series: [...svg.querySelectorAll('polyline.series')].map(p => ({
    label: p.dataset.label,
    points: p.points.numberOfItems,
    xy: [...Array(p.points.numberOfItems).keys()].map(i => [p.points.getItem(i).x, p.points.getItem(i).y])})),
  bands: [...svg.querySelectorAll('polygon.band')].map(p => ({
    label: p.dataset.label,
    points: p.points.numberOfItems}))})))"""


class Browser:
    def __init__(self, work):
        self.profile = tempfile.mkdtemp(dir=work)
        chromium = shutil.which("chromium") or shutil.which("chromium-headless-shell")
        if not chromium:
            sys.exit("FAILED: chromium not found: install Debian's chromium (tools/dev deps)")
        self.process = subprocess.Popen([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
                                         "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 60
        while not os.path.exists(port_file) or len(open(port_file).read().split()) < 2:
            if self.process.poll() is not None or time.time() > deadline:
                sys.exit("FAILED: chromium did not start: " + self.process.stderr.read().decode()[-2000:])
            time.sleep(0.1)
        port, path = open(port_file).read().split()[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=60)
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method, session, seconds=60):
        deadline = time.time() + seconds
        while time.time() < deadline:
            for event in self.events:
                if event.get("method") == method and event.get("sessionId") == session:
                    return
            self.events.append(json.loads(self.ws.recv()))
        raise RuntimeError(f"no {method} within {seconds} s")

    def evaluate(self, expression, session):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url, controls=()):
        """Loads `url` in a new tab; returns what the checks need. With
        `controls` (control ids), also the charts shown after clicking each
        in turn, and the summary table's fit on screen and in print."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(domain + ".enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session)
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired", session)
        time.sleep(0.5)  # let late requests and messages arrive
        charts = self.evaluate(CHARTS_JS, session)
        shot = self.send("Page.captureScreenshot", {"format": "png"}, session)["data"]
        after = {}
        for control in controls:
            self.evaluate(f"document.getElementById('{control}').click()", session)
            after[control] = json.loads(self.evaluate(CHARTS_JS, session))
        fits = {}
        if controls:
            # A page's width in print (A4 less margins): the table fits it, or
            # on screen scrolls sideways, which shows that the check can fail.
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": 700, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session)
            for media in ("screen", "print"):
                self.send("Emulation.setEmulatedMedia", {"media": media}, session)
                fits[media] = self.evaluate(TABLE_FITS_JS, session)
        mine = [e for e in self.events if e.get("sessionId") == session]
        console = [e["params"] for e in mine if e["method"] in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown")]
        console += [e["params"]["entry"] for e in mine
                    if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] in ("error", "warning")]
        requests = [e["params"]["request"]["url"] for e in mine if e["method"] == "Network.requestWillBeSent"]
        self.send("Target.closeTarget", {"targetId": target})
        return {"charts": json.loads(charts), "console": console, "requests": [r for r in requests if r != url],
                "ink": ink(shot), "after": after, "fits": fits}

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:
            self.process.kill()
        self.process.wait(timeout=30)


def ink(png_base64):
    """The fraction of the screenshot's pixels that are not (nearly) white."""
    image = Image.open(io.BytesIO(base64.b64decode(png_base64))).convert("L")
    histogram = image.histogram()
    return sum(histogram[:240]) / (image.width * image.height)


def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


PLOT_WIDTH = 560  # runtime/output/report/line_chart.h: kPlotWidth, the columns series are down-sampled to


def finite_points(x, y):
    return [(a, b) for a, b in zip(x, y) if math.isfinite(a) and math.isfinite(b)]


def drawn_points(series, bands=None):
    """{variant: points drawn} for one chart's {variant: (x, y)}: per pixel
    column over the chart's x range, the first smallest and the first largest
    value (docs/reports.md); points with a non-finite value are not drawn.
    With `bands` ({variant: (x, spread)}), also {variant: points of the band},
    its upper edge's and its lower edge's, down-sampled the same way."""
    finite = {v: finite_points(*xy) for v, xy in series.items()}
    xs = [x for points in finite.values() for x, _ in points]
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if not hi - lo > 1e-9 * max(abs(lo), abs(hi)):  # a flat range is widened as the chart widens it
        pad = 1.0 if lo == 0 else abs(lo) * 0.05
        lo, hi = lo - pad, hi + pad
    width = hi - lo

    def count(points):
        columns = {}
        for i, (x, y) in enumerate(points):
            c = min(max(int((x - lo) / width * PLOT_WIDTH), 0), PLOT_WIDTH - 1)
            low, high = columns.get(c, (i, i))
            columns[c] = (i if y < points[low][1] else low, i if y > points[high][1] else high)
        return sum(1 if low == high else 2 for low, high in columns.values())

    counts = {v: count(points) for v, points in finite.items()}
    if bands is None:
        return counts
    band_counts = {}
    for v, (x, y) in series.items():
        spread = bands[v]
        upper = [a + b for a, b in zip(y, spread)]
        lower = [a - b for a, b in zip(y, spread)]
        band_counts[v] = count(finite_points(x, upper)) + count(finite_points(x, lower))
    return counts, band_counts


LEFT, TOP, PLOT_HEIGHT = 64, 12, 220  # line_chart.cpp: kLeft, kTop, kPlotHeight
# The charts the page's controls switch (report_page.cpp): a log x axis, and
# the train loss smoothed.
LOG_CHARTS = {"train-loss-time", "train-loss-bytes", "val-global-time", "val-global-bytes"}
SMOOTHED_CHARTS = {"train-loss-step", "train-loss-time", "train-loss-bytes"}


def ema(values, weight):
    """W&B's debiased exponential moving average, as the report smooths
    (runtime/output/report/smoothing.cpp): the same float operations."""
    out, last, kept = [], 0.0, 1.0
    for v in values:
        if not math.isfinite(v):
            out.append(math.nan)
            continue
        last = weight * last + (1 - weight) * v
        kept *= weight
        out.append(last / (1 - kept))
    return out


def padded(lo, hi):
    if not hi - lo > 1e-9 * max(abs(lo), abs(hi)):
        pad = 1.0 if lo == 0 else abs(lo) * 0.05
        return lo - pad, hi + pad
    return lo, hi


def downsample(points, lo, width):
    """runtime/output/report/downsample.cpp: per pixel column in turn, the
    first smallest and the first largest point, in their order."""
    kept, column, low, high = [], None, 0, 0
    for i, (x, y) in enumerate(points):
        c = min(max(int((x - lo) / width * PLOT_WIDTH), 0), PLOT_WIDTH - 1)
        if c != column:
            if column is not None:
                kept += [points[j] for j in sorted({low, high})]
            column, low, high = c, i, i
        else:
            low = i if y < points[low][1] else low
            high = i if y > points[high][1] else high
    if column is not None:
        kept += [points[j] for j in sorted({low, high})]
    return kept


def expected_coords(series, log_x, weight):
    """{variant: [(px, py)]}: where one chart view draws each variant's
    points, from {variant: (x, y)}."""
    finite = {}
    for v, (x, y) in series.items():
        x = [math.log10(a) if a > 0 else math.nan for a in x] if log_x else x
        finite[v] = finite_points(x, ema(y, weight) if weight else y)
    xs = [x for points in finite.values() for x, _ in points]
    lo, hi = padded(min(xs), max(xs)) if xs else (0.0, 1.0)
    kept = {v: downsample(points, lo, hi - lo) for v, points in finite.items()}
    ys = [y for points in kept.values() for _, y in points]
    y_lo, y_hi = padded(min(ys), max(ys)) if ys else (0.0, 1.0)
    return {v: [(LEFT + (x - lo) / (hi - lo) * PLOT_WIDTH, TOP + (y_hi - y) / (y_hi - y_lo) * PLOT_HEIGHT)
                for x, y in points] for v, points in kept.items()}


def view_problems(shown_charts, comparison, log_x, smoothing):
    """The charts shown with the log scale on or off and a smoothing code
    ("0", "90") chosen: one view of each chart, every series where it
    belongs (within the SVG's rounding to 0.1 pixel)."""
    series = {}
    for v in VARIANTS:
        for chart, xy in run_series(os.path.join(comparison, v)).items():
            series.setdefault(chart, {})[v] = xy
    wanted = {}
    for chart in series:
        log = log_x and chart in LOG_CHARTS
        smooths = smoothing != "0" and chart in SMOOTHED_CHARTS
        wanted[chart + ("-log" if log else "") + (f"-ema{smoothing}" if smooths else "")] = (chart, log, smooths)
    shown = {c["id"]: c for c in shown_charts}
    what = f"log scale {'on' if log_x else 'off'}, smoothing {smoothing}"
    if shown.keys() != wanted.keys():
        return [f"{what}: shown {sorted(shown)}, expected {sorted(wanted)}"]
    problems = []
    for view, (chart, log, smooths) in wanted.items():
        drawn_xy = {s["label"]: s["xy"] for s in shown[view]["series"]}
        for v, points in expected_coords(series[chart], log, int(smoothing) / 100 if smooths else 0).items():
            got = drawn_xy.get(v) or []
            if len(got) != len(points) or any(abs(a - c) > 0.06 or abs(b - d) > 0.06
                                              for (a, b), (c, d) in zip(got, points)):
                problems.append(f"{what}: chart {view}, {v}: drew {got[:3]}..., expected {points[:3]}...")
    return problems


def run_series(run):
    """{chart id: (x, y)} of one run folder, from its CSV files."""
    series = {}
    train = csv_rows(os.path.join(run, "train.csv"))
    val = csv_rows(os.path.join(run, "validation.csv"))
    for chart, x, y in (("train-loss-step", "step", "train_loss"), ("train-loss-time", "sim_time_s", "train_loss"),
                        ("train-loss-bytes", "bytes_sent", "train_loss"), ("lr-step", "step", "lr")):
        series[chart] = ([float(r[x]) for r in train], [float(r[y]) for r in train])
    for chart, x, y in (("val-global-step", "step", "global_loss"), ("val-global-time", "sim_time_s", "global_loss"),
                        ("val-global-bytes", "bytes_sent", "global_loss"), ("val-local-step", "step", "local_loss"),
                        ("val-global-accuracy-step", "step", "global_accuracy")):
        series[chart] = ([float(r[x]) for r in val], [float(r[y]) for r in val])
    metrics = {}
    for row in csv_rows(os.path.join(run, "metrics.csv")):
        metrics.setdefault(row["name"], {}).setdefault(int(row["step"]), []).append(float(row["value"]))
    for name, by_step in metrics.items():
        steps = sorted(by_step)
        series["metric-" + name] = (steps, [sum(by_step[s]) / len(by_step[s]) for s in steps])
    return series


def expected_charts(comparison):
    """{chart id: {variant: points}} from the variants' CSV files."""
    series = {}
    for v in VARIANTS:
        for chart, xy in run_series(os.path.join(comparison, v)).items():
            series.setdefault(chart, {})[v] = xy
    return {chart: drawn_points(s) for chart, s in series.items()}


def mean_and_spread(values):
    """The mean and the sample standard deviation (n - 1), as the report
    computes them (runtime/util/mean_std.cpp): equal values exactly."""
    if all(v == values[0] for v in values):
        return values[0], 0.0
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) * (v - mean) for v in values) / (len(values) - 1))


def expected_seeded_charts(comparison):
    """{chart id: ({variant: points}, {variant: band points})}: each
    variant's seeds averaged row by row (up to the shortest seed's rows)."""
    series, bands = {}, {}
    for v in SEEDED_VARIANTS:
        seeds = [run_series(os.path.join(comparison, v, f"seed-{s}")) for s in SEEDS]
        for chart in seeds[0]:
            rows = min(len(seed[chart][0]) for seed in seeds)
            xs, ys, spreads = [], [], []
            for i in range(rows):
                xs.append(mean_and_spread([seed[chart][0][i] for seed in seeds])[0])
                y, spread = mean_and_spread([seed[chart][1][i] for seed in seeds])
                ys.append(y)
                spreads.append(spread)
            series.setdefault(chart, {})[v] = (xs, ys)
            bands.setdefault(chart, {})[v] = spreads
    return {chart: drawn_points(s, bands[chart]) for chart, s in series.items()}


def check_canary(browser, work):
    canary = os.path.join(work, "canary.html")
    with open(canary, "w") as f:
        f.write('<!DOCTYPE html><body><img src="http://192.0.2.1/x.png"><script>console.error("x")</script>')
    seen = browser.open("file://" + canary)
    problems = []
    if not seen["console"]:
        problems.append("a console error went unseen")
    if not any(r.startswith("http://192.0.2.1/") for r in seen["requests"]):
        problems.append("a network request went unseen")
    if seen["ink"] > 0.001:
        problems.append(f"a blank page has ink {seen['ink']:.4f}")
    if problems:
        sys.exit("FAILED: the checks cannot fail: " + "; ".join(problems))


def run_manifest(manifest, source, build, work):
    """Runs `manifest` (MNIST from the repository, outputs under `work`);
    returns its comparison folder."""
    manifest = json.loads(json.dumps(manifest))
    for split in ("train", "val"):
        manifest["data"][split]["path"] = os.path.join(source, "examples", "data", "mnist")
    manifest["output"]["dir"] = os.path.join(work, "runs")
    path = os.path.join(work, manifest["name"] + ".json")
    with open(path, "w") as f:
        json.dump(manifest, f)
    run = subprocess.run([os.path.join(build, "bin", "exogym-run"), "--quiet", path],
                         capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        sys.exit(f"FAILED: exogym-run exited {run.returncode}: {run.stderr[-2000:]}")
    return os.path.join(work, "runs", manifest["name"])


def page_problems(seen):
    problems = [f"console: {c}" for c in seen["console"]]
    problems += [f"network request: {r}" for r in seen["requests"]]
    if seen["ink"] < 0.02:
        problems.append(f"the screenshot is blank ({seen['ink']:.4f} of its pixels are not white)")
    return problems


def drawn(seen, kind):
    """{chart id: {label: points}} of the page's series or bands; a label
    drawn twice in one chart is a problem the dict would hide, so it is
    listed as label#2."""
    out = {}
    for chart in seen["charts"]:
        labels = {}
        for item in chart[kind]:
            label = item["label"] if item["label"] not in labels else item["label"] + "#2"
            labels[label] = item["points"]
        out[chart["id"]] = labels
    return out


def chart_problems(drawn_charts, expected, what):
    problems = [f"chart {chart}: not expected" for chart in drawn_charts.keys() - expected.keys()]
    for chart, series in expected.items():
        if drawn_charts.get(chart) != series:
            problems.append(f"chart {chart}: drew {what} {drawn_charts.get(chart)}, expected {series}")
    return problems


def main():
    # Absolute: the manifests are written into a temporary folder, and their
    # data paths must not depend on where this script was started.
    source, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    work = tempfile.mkdtemp(prefix="exogym-report-browser-")
    try:
        comparison = run_manifest(MANIFEST, source, build, work)
        seeded = dict(MANIFEST, name="seeded", seeds=SEEDS)
        del seeded["seed"]
        seeded["runs"] = [r for r in MANIFEST["runs"] if r["name"] in SEEDED_VARIANTS]
        seeded_comparison = run_manifest(seeded, source, build, work)

        browser = Browser(work)
        try:
            check_canary(browser, work)
            seen = browser.open("file://" + os.path.join(comparison, "report.html"),
                                controls=("log-scale", "smoothing-90"))
            seen_seeded = browser.open("file://" + os.path.join(seeded_comparison, "report.html"))
        finally:
            browser.close()

        problems = page_problems(seen)
        problems += chart_problems(drawn(seen, "series"), expected_charts(comparison), "series")
        problems += [f"chart {c['id']}: a band without seeds" for c in seen["charts"] if c["bands"]]
        problems += view_problems(seen["charts"], comparison, False, "0")
        problems += view_problems(seen["after"]["log-scale"], comparison, True, "0")
        problems += view_problems(seen["after"]["smoothing-90"], comparison, True, "90")
        if seen["fits"]["screen"]:
            problems.append("the summary table fits 700 pixels on screen: the print check cannot fail")
        if not seen["fits"]["print"]:
            problems.append("the summary table is cut in print (wider than a 700-pixel page)")
        seeded_problems = page_problems(seen_seeded)
        expected = expected_seeded_charts(seeded_comparison)
        seeded_problems += chart_problems(drawn(seen_seeded, "series"), {c: e[0] for c, e in expected.items()},
                                          "series")
        seeded_problems += chart_problems(drawn(seen_seeded, "bands"), {c: e[1] for c, e in expected.items()}, "bands")
        problems += [f"seeded: {p}" for p in seeded_problems]
        if problems:
            sys.exit("FAILED:\n  " + "\n  ".join(problems))
        print("log scale and smoothing switch every chart's view as expected; the table fits a printed page")
        print(f"{len(seen['charts'])} charts as expected, and {len(seen_seeded['charts'])} over {len(SEEDS)} seeds "
              f"with a band per variant; no console message, no request, {seen['ink']:.1%} and "
              f"{seen_seeded['ink']:.1%} of the screenshots drawn")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
