#!/usr/bin/python3
"""An independent implementation of every ecopt algorithm, for the tests.

Written from docs/algorithms.md ("The problem", "Compressors", "Algorithms,
round by round", "Defaults"), in the papers' notation, not from the engine's
C. It reads a trace the engine wrote (ecopt/trace.h; the format is in
docs/testing.md, "The reference trace"), takes from it only what is random
(the rows each worker sampled, the coins, the coordinates rand-k chose, the
levels dithering rounded to; for top-k the engine's choice only among exact
near-ties) and ECLK's inflation, computes everything else itself
(gradients, compressors, error memories, shifts, steps, prox, ECLK's online
contraction estimate), and
compares every replicated vector with the engine's after every round.

    reference.py TRACE [--tol 1e-10]

Prints one line: the case, the rounds checked, the largest deviation seen;
exits 0 when every deviation is within tol, 1 (saying where) otherwise.
"""

import math
import os
import sys

import numpy as np


class Mismatch(Exception):
    pass


# ---- the trace ---------------------------------------------------------


def read_trace(path):
    """The header as dicts and the rounds as a list of records."""
    with open(path) as f:
        lines = f.read().split("\n")
    if not lines[0].startswith("ecopt-trace 1"):
        raise Mismatch("%s: not an ecopt trace of version 1" % path)
    head, shards, i = {}, [], 1
    while i < len(lines) and lines[i] and lines[i].split()[0] not in ("init", "round"):
        tok = lines[i].split()
        if tok[0] == "shard":
            shards.append((int(tok[2]), int(tok[3])))
        elif tok[0] == "dataset":
            head["dataset"] = lines[i][len("dataset "):]
        elif tok[0] in ("compressor", "shift", "down"):
            head[tok[0]] = dict(zip(tok[2::2], tok[3::2]), _name=tok[1])
        else:
            head[tok[0]] = dict(zip(tok[1::2], tok[2::2]))
        i += 1
    records, rec = [], None
    for line in lines[i:]:
        if not line:
            continue
        tok = line.split()
        tag = tok[0]
        if tag in ("init", "round"):
            rec = {"init": tag == "init", "round": int(tok[1]) if tag == "round" else 0,
                   "rows": {}, "q": {}, "shift": {}, "diff": {}, "down": {}, "refresh": {},
                   "state": {}}
            records.append(rec)
        elif tag == "coin":
            rec["coin"] = int(tok[1])
            rec["constants"] = [float(v) for v in tok[3:7]]
            kv = dict(zip(tok[7::2], tok[8::2]))
            rec["delta_eff"] = float(kv["delta_eff"])
            rec["inflation"] = float(kv["inflation"])
            rec["restarts"] = int(kv["restarts"])
        elif tag == "rows":
            rec["rows"][int(tok[1])] = np.array([int(v) for v in tok[2:]])
        elif tag == "refresh":
            rec["refresh"][int(tok[1])] = int(tok[2])
        elif tag == "part":
            rec["part"] = [int(v) for v in tok[1:]]
        elif tag in ("q", "shift", "diff", "down"):
            nnz = int(tok[2])
            idx = np.array([int(v) for v in tok[3:3 + nnz]], dtype=np.int64)
            levels = None
            if len(tok) > 3 + nnz and tok[3 + nnz] == "levels":
                levels = np.array([int(v) for v in tok[4 + nnz:]], dtype=np.int64)
            if len(tok) > 3 + nnz and tok[3 + nnz] == "powers":
                levels = [None if v == "z" else int(v) for v in tok[4 + nnz:]]
            rec[tag][int(tok[1])] = (idx, levels)
        else:
            rec["state"][tag] = np.array([float(v) for v in tok[1:]])
    return head, shards, records


def read_libsvm(path, d):
    """Dense rows and labels mapped to +1 (the larger label) and -1."""
    rows, labels = [], []
    with open(path) as f:
        for line in f:
            tok = line.split()
            if not tok:
                continue
            labels.append(float(tok[0]))
            row = np.zeros(d)
            for t in tok[1:]:
                j, v = t.split(":")
                row[int(j) - 1] = float(v)
            rows.append(row)
    y = np.array(labels)
    hi = y.max()
    return np.array(rows), np.where(y == hi, 1.0, -1.0)


# ---- the problem (docs/algorithms.md, "The problem") --------------------


class Problem:
    def __init__(self, A, b, loss, lam1, lam2, shards):
        self.A, self.b, self.loss = A, b, loss
        self.lam1, self.lam2 = lam1, lam2
        self.shards = shards
        self.c = 0.25 if loss == "logistic" else 1.0

    def grad_rows(self, tau, x, rows):
        """grad of worker tau's f^(tau) on the rows S (repeated as drawn):
        w_tau (1/|S|) sum over S of loss'(b_i <a_i, x>) b_i a_i + lambda2 x,
        w_tau = n m_tau / N its shard's share of the rows."""
        A, b = self.A[rows], self.b[rows]
        lo, hi = self.shards[tau]
        weight = len(self.shards) * (hi - lo) / self.A.shape[0]
        t = b * (A @ x)
        if self.loss == "logistic":
            dl = -np.exp(-np.logaddexp(0.0, t))     # -1/(1 + e^t)
        else:
            dl = t - 1.0
        return weight * (A.T @ (dl * b)) / len(rows) + self.lam2 * x

    def value_shard(self, tau, x):
        """f^(tau)(x): w_tau (1/m_tau) sum of its rows' losses + lambda2/2 ||x||^2."""
        lo, hi = self.shards[tau]
        weight = len(self.shards) * (hi - lo) / self.A.shape[0]
        t = self.b[lo:hi] * (self.A[lo:hi] @ x)
        if self.loss == "logistic":
            ell = np.logaddexp(0.0, -t)             # log(1 + e^-t)
        else:
            ell = 0.5 * (t - 1.0) ** 2
        return weight * float(np.mean(ell)) + 0.5 * self.lam2 * float(x @ x)

    def value(self, x):
        """P(x) = (1/n) sum f^(tau)(x) + lambda1 ||x||_1."""
        n = len(self.shards)
        return sum(self.value_shard(t, x) for t in range(n)) / n + \
            self.lam1 * float(np.sum(np.abs(x)))

    def grad_shard(self, tau, x):
        lo, hi = self.shards[tau]
        return self.grad_rows(tau, x, np.arange(lo, hi))

    def prox(self, v, t):
        """The prox of t ||.||_1: soft thresholding."""
        if self.lam1 == 0.0:
            return v
        return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


# ---- compressors (docs/algorithms.md, "Compressors") -------------------


def dither_omega(d, s):
    return min(d / (s * s), math.sqrt(d) / s)


def natdither_omega(d, s):
    """Natural dithering with the Euclidean norm: 1/8 + r min(1, r),
    r = sqrt(d) / 2^(s-1)."""
    r = math.sqrt(d) / 2.0 ** (s - 1)
    return 0.125 + r * min(1.0, r)


def comp_delta(kind, k, s, d):
    """delta of the job's contraction (docs/algorithms.md, "Compressors")."""
    if kind == "dither":
        return 1.0 / (1.0 + dither_omega(d, s))
    if kind == "natural-dither":
        return 1.0 / (1.0 + natdither_omega(d, s))
    return {"none": 1.0, "topk": k / d, "randk": k / d, "natural": 7.0 / 8.0}.get(kind)


def comp_omega(kind, k, s, d):
    """omega of DIANA's unbiased shift compressor."""
    if kind == "dither-unbiased":
        return dither_omega(d, s)
    if kind == "natural-dither-unbiased":
        return natdither_omega(d, s)
    return {"none": 0.0, "randk-unbiased": d / k - 1.0 if k else 0.0,
            "natural": 0.125}.get(kind)


class Compressors:
    """Q of a type, given the trace's record of its random choice."""

    def __init__(self, d):
        self.d = d
        self.near_ties = 0

    def apply(self, kind, k, s, t, choice):
        d = self.d
        if kind == "none":
            return t.copy()
        idx, levels = choice
        q = np.zeros(d)
        if kind == "topk":
            return self.topk(t, k, idx)
        if kind in ("randk", "randk-unbiased"):
            if len(idx) != k or len(set(idx.tolist())) != k or idx.min() < 0 or idx.max() >= d:
                raise Mismatch("rand-k sent %d indices, not %d distinct ones in 0..%d"
                               % (len(idx), k, d - 1))
            factor = d / k if kind == "randk-unbiased" else 1.0
            q[idx] = factor * t[idx]
            return q
        if kind in ("dither", "dither-unbiased"):
            scale = 1.0 / (1.0 + dither_omega(d, s)) if kind == "dither" else 1.0
            return self.dither(t, s, scale, idx, levels)
        if kind == "natural":
            return self.natural(t, idx, levels)
        if kind in ("natural-dither", "natural-dither-unbiased"):
            scale = 1.0 / (1.0 + natdither_omega(d, s)) if kind == "natural-dither" else 1.0
            return self.natdither(t, s, scale, idx, levels)
        raise Mismatch("unknown compressor %s" % kind)

    def natural(self, t, idx, powers):
        """C_nat: |t_j| rounded to 2^floor(log2 |t_j|) or twice that, sign
        kept; the trace says which power (none for a zero). Every entry is
        sent."""
        if len(idx) != self.d or powers is None or len(powers) != self.d:
            raise Mismatch("natural sent %d entries, not all %d" % (len(idx), self.d))
        q = np.zeros(self.d)
        for j, e in enumerate(powers):
            a = abs(t[j])
            if e is None:
                if a > 1e-300:
                    raise Mismatch("natural: %.17g at %d sent as 0" % (t[j], j))
                continue
            # 2^e is one of the two powers around a: a in [2^(e-1), 2^(e+1)].
            if not (2.0 ** (e - 1) * (1 - 1e-9) <= a <= 2.0 ** (e + 1) * (1 + 1e-9)):
                raise Mismatch("natural: 2^%d at %d where |t| = %.17g" % (e, j, a))
            q[j] = math.copysign(2.0 ** e, t[j])
        return q

    def natdither(self, t, s, scale, idx, levels):
        """y_j = |t_j| / ||t|| rounded to a neighbouring level of 0,
        2^(1-s), ..., 1/2, 1 (level l stands for 2^(l-s)); the trace says
        which."""
        q = np.zeros(self.d)
        norm = np.linalg.norm(t)
        if norm == 0.0:
            if len(idx):
                raise Mismatch("natural dithering of a zero vector sent levels")
            return q
        lev = np.zeros(self.d, dtype=np.int64)
        lev[idx] = levels
        for j in range(self.d):
            y = abs(t[j]) / norm
            l = int(lev[j])
            val = 0.0 if l == 0 else 2.0 ** (l - s)
            below = 0.0 if l <= 1 else 2.0 ** (l - 1 - s)
            above = 2.0 ** (l + 1 - s) if l < s else 1.0
            if l < 0 or l > s or not (below * (1 - 1e-9) <= y <= above * (1 + 1e-9)):
                raise Mismatch("natural dithering: level %d at %d where y = %.17g" % (l, j, y))
            q[j] = math.copysign(val * norm * scale, t[j])
        return q

    def topk(self, t, k, theirs):
        """The k largest |t_j|, ties to the smaller index. Where the
        engine's set differs only by coordinates within 1e-9 of the k-th
        magnitude (rounding decides such ties), its set is taken."""
        mag = np.abs(t)
        mine = np.argsort(-mag, kind="stable")[:k]
        chosen = mine
        if set(mine.tolist()) != set(theirs.tolist()):
            kth = np.sort(mag)[::-1][k - 1]
            diff = set(mine.tolist()) ^ set(theirs.tolist())
            if len(theirs) != k or any(abs(mag[j] - kth) > 1e-9 * max(kth, 1e-300) for j in diff):
                raise Mismatch("top-%d: the engine sent %s, the k largest are %s"
                               % (k, sorted(theirs.tolist()), sorted(mine.tolist())))
            self.near_ties += 1
            chosen = theirs
        q = np.zeros(self.d)
        q[chosen] = t[chosen]
        return q

    def dither(self, t, s, scale, idx, levels):
        """r_j = s |t_j| / ||t||, rounded up with probability r_j -
        floor(r_j): the trace says which way; it must be one of the two."""
        q = np.zeros(self.d)
        norm = np.linalg.norm(t)
        if norm == 0.0:
            if len(idx):
                raise Mismatch("dither of a zero vector sent levels")
            return q
        r = s * np.abs(t) / norm
        lev = np.zeros(self.d, dtype=np.int64)
        lev[idx] = levels
        lo = np.floor(r - 1e-9)
        hi = np.minimum(np.ceil(r + 1e-9), s)
        bad = np.nonzero((lev < lo) | (lev > hi))[0]
        if len(bad):
            j = bad[0]
            raise Mismatch("dither: level %d at %d where r = %.17g" % (lev[j], j, r[j]))
        return np.sign(t) * lev * (norm * scale / s)


# ---- the algorithms (docs/algorithms.md, "Algorithms, round by round") --


def default_step(algo, h, pb, n, m, batch, delta):
    """The default step of "The baselines' steps" and "ECLK's constants"."""
    L_f, L = float(h["problem"]["L_f"]), float(h["problem"]["L"])
    L_eff = L_f if batch >= m else L_f + L / (n * batch)
    if algo in ("gd", "ec-gd", "ec-gd-diana"):
        return 1.0 / L_f, L_eff
    if algo in ("sgd", "ec-sgd", "ec-lsvrg", "ec-sgd-diana", "ec-lsvrg-diana", "econtrol"):
        return 1.0 / L_eff, L_eff
    if algo == "ec-lsvrg-qian":
        # Loopless SVRG's theory step 1/(6 L), L = ECLK's L_eff.
        return 1.0 / (6.0 * L_eff), L_eff
    if algo == "adef":
        # The scale of ADEF's weights, a_{t+1}^2 = gamma A_{t+1}:
        # delta / (2 L_eff) ("ADEF's constants").
        return delta / (2.0 * L_eff), L_eff
    if algo == "ef21":
        if delta >= 1.0:
            return 1.0 / L_f, L_eff
        r = math.sqrt(1.0 - delta)
        theta, beta = 1.0 - r, (1.0 - delta) / (1.0 - r)
        Lt = float(h["problem"]["L_tilde"])
        return 64.0 / (L_f + Lt * math.sqrt(beta / theta)), L_eff
    return None, L_eff


def katyusha_constants(L_eff, mu, p, inflation):
    """L-Katyusha's theory values from L_delta = inflation L_eff."""
    L_delta = inflation * L_eff
    sigma = mu / L_delta
    theta2 = 0.5
    theta1 = min(math.sqrt(2.0 * sigma / (3.0 * p)), 0.5)
    eta = theta2 / ((1.0 + theta2) * theta1)
    return eta / L_delta, theta1, eta, sigma


def adiana_constants(mu, p, eta):
    """Li, Kovalev, Qian and Richtarik's ADIANA (docs/algorithms.md,
    "ADIANA's constants"): from the step eta, theta1 = min(1/4,
    sqrt(eta mu / p)), theta2 = 1/2, gamma = eta / (2 (theta1 + eta mu)),
    beta = 1 - gamma mu."""
    theta1 = min(0.25, math.sqrt(eta * mu / p))
    gamma = eta / (2.0 * (theta1 + eta * mu))
    return theta1, 0.5, gamma, 1.0 - gamma * mu


def adiana_theory(L, n, omega):
    """ADIANA's p and step eta by its theorem; L is each f^(tau)'s
    smoothness (here the problem's L over the smoothness multiplier)."""
    if omega == 0.0:
        return 1.0, 1.0 / (2.0 * L)
    p = min(1.0, max(1.0, math.sqrt(n / (32.0 * omega)) - 1.0) / (2.0 * (1.0 + omega)))
    eta = min(1.0 / (2.0 * L), n / (64.0 * omega * (2.0 * p * omega + 1.0) ** 2 * L))
    return p, eta


# The adaptive rule's guard (docs/algorithms.md, "ECLK's guard"): a rise of
# P above its best by ADAPTIVE_FIRE of P(x0) - best restarts; each restart
# multiplies the plain constants' inflation by ADAPTIVE_BACKOFF, except that
# one from the second on whose rise passed ADAPTIVE_SEVERE falls back to
# the online rule's.
ADAPTIVE_FIRE = 0.5
ADAPTIVE_BACKOFF = 1.2
ADAPTIVE_SEVERE = 2.0


def eclk_inflation(delta, c=0.5):
    """max(1, (1/3) / (c a_max(delta))), a_max(delta) = 2 sin(pi delta /
    (2 (2 - delta))): docs/algorithms.md, "ECLK's constants"."""
    a_max = 2.0 * math.sin(math.pi * delta / (2.0 * (2.0 - delta)))
    return max(1.0, (1.0 / 3.0) / (c * a_max))


def close(a, b, tol=1e-12):
    return abs(a - b) <= tol * max(abs(a), abs(b), 1e-300)


class Reference:
    def __init__(self, head, shards, pb):
        job = head["job"]
        self.algo = job["algorithm"]
        self.n, self.d = int(job["n"]), int(job["d"])
        self.batch = int(job["batch"])
        self.pb = pb
        comp, shift = head["compressor"], head["shift"]
        self.comp = (comp["_name"], int(comp["k"]), int(comp["s"]))
        self.shift = (shift["_name"], int(shift["k"]), int(shift["s"]))
        self.Q = Compressors(self.d)
        sizes = [hi - lo for lo, hi in shards]
        self.m = min(sizes)
        if self.m != int(job["m"]):
            raise Mismatch("smallest shard: %d rows, the engine says %s" % (self.m, job["m"]))
        kind, k, s = self.comp
        d = self.d
        self.delta = comp_delta(kind, k, s, d)
        skind, sk, ss = self.shift
        omega = comp_omega(skind, sk, ss, d)
        self.alpha = 1.0 / (1.0 + omega)
        prm = head["params"]
        # Partial participation (docs/algorithms.md, "Partial
        # participation"): ceil(participation n) workers a round, gd, sgd
        # and ef21 only.
        self.participation = float(prm.get("participation", 1.0))
        self.r = min(max(math.ceil(self.participation * self.n - 1e-9), 1), self.n)
        if self.r != int(prm.get("participants", self.n)):
            raise Mismatch("participants: %d by docs/algorithms.md, the engine uses %s"
                           % (self.r, prm.get("participants")))
        if self.r < self.n and self.algo not in ("gd", "sgd", "ef21"):
            raise Mismatch("%s ran with partial participation, which its theory "
                           "does not admit" % self.algo)
        self.gamma, self.L_eff = default_step(self.algo, head, pb, self.n, self.m,
                                              self.batch, self.delta)
        # EF21-P (docs/algorithms.md, "Compressed broadcasts: EF21-P"): the
        # server broadcasts c_t = C_down(x_{t+1} - w_t), contractive with
        # alpha = k/d, and the step is the method's own times alpha; gd and
        # ec-gd-diana only.
        self.down = None
        if "down" in head:
            dn = head["down"]
            self.down = (dn["_name"], int(dn["k"]), int(dn["s"]))
            if self.algo not in ("gd", "ec-gd-diana"):
                raise Mismatch("%s ran with a compressed broadcast, which its theory "
                               "does not admit" % self.algo)
            if self.down[0] not in ("topk", "randk"):
                raise Mismatch("broadcast compressor %s is not a sparsifier" % self.down[0])
            self.gamma *= self.down[1] / d
        # ECLK's constants are checked round by round at this multiple.
        self.step_multiplier = float(prm["step_multiplier"])
        if self.gamma is not None:
            self.gamma *= float(prm["step_multiplier"])
            if int(prm["step_given"]):
                self.gamma = float(prm["gamma"])
            if not close(self.gamma, float(prm["gamma"])):
                raise Mismatch("step: %.17g by docs/algorithms.md, the engine uses %s"
                               % (self.gamma, prm["gamma"]))
        if self.algo in ("eclk", "lkatyusha", "ec-lsvrg", "ec-lsvrg-qian", "ec-lsvrg-diana"):
            if self.algo in ("eclk", "ec-lsvrg-qian"):
                self.p = max(self.batch / self.m, self.delta)
            elif self.algo == "lkatyusha":
                self.p = 1.0
            else:
                self.p = self.batch / self.m
            if not close(self.p, float(prm["p"])):
                raise Mismatch("p: %.17g by docs/algorithms.md, the engine uses %s"
                               % (self.p, prm["p"]))
        # ECLK's online estimate, kept here from this reference's own error
        # memories (docs/algorithms.md, "ECLK's contraction estimate").
        self.rule = prm.get("eclk_rule", "nominal") if self.algo == "eclk" else "nominal"
        # The adaptive rule's guard (docs/algorithms.md, "ECLK's guard"):
        # P(w) on the coin rounds against its best, restarts counted here.
        self.watch = self.rule == "adaptive" and int(prm.get("eclk_guard", "0")) == 1
        self.restarts = 0
        self.restart_round = 0
        self.fallen_back = False
        self.guard = 1.0
        self.delta_eff = self.delta
        self.est_in = self.est_out = 0.0
        self.acc_in = self.acc_out = 0.0
        if self.algo == "adiana":
            self.omega = omega
            p_th, eta = adiana_theory(float(head["problem"]["L"]), self.n, omega)
            self.p = p_th
            self.gamma = eta * float(prm["step_multiplier"])
            if int(prm["step_given"]):
                self.gamma = float(prm["gamma"])
            for mine, name in ((self.p, "p"), (self.gamma, "gamma")):
                if not close(mine, float(prm[name])):
                    raise Mismatch("%s: %.17g by docs/algorithms.md, the engine uses %s"
                                   % (name, mine, prm[name]))
        if self.algo in ("ec-sgd-diana", "ec-gd-diana", "ec-lsvrg-diana", "adiana") and \
                not close(self.alpha, float(prm["alpha"])):
            raise Mismatch("alpha: %.17g, the engine uses %s" % (self.alpha, prm["alpha"]))
        self.stochastic = self.algo in ("eclk", "lkatyusha", "ec-sgd", "ec-lsvrg",
                                        "ec-lsvrg-qian", "ec-sgd-diana", "ec-lsvrg-diana",
                                        "sgd", "econtrol", "adef") and self.batch < self.m
        # EControl's eta: half the compressor's delta (docs/algorithms.md,
        # "EControl").
        self.eta_ec = 0.5 * self.delta
        # ADEF: A_t and the server's control variate g~_t (in u); the
        # workers' g~_t^i are in h, their memories e_t^i in e.
        self.A = 0.0
        z = np.zeros(d)
        # EF21-P's proxy w_t, which every worker knows and computes at.
        self.wp = z.copy()
        self.x, self.y, self.zv, self.w, self.u = z.copy(), z.copy(), z.copy(), z.copy(), z.copy()
        self.e = [z.copy() for _ in range(self.n)]
        self.h = [z.copy() for _ in range(self.n)]
        self.w_loc = [z.copy() for _ in range(self.n)]
        self.mu_loc = [pb.grad_shard(t, z) for t in range(self.n)] \
            if self.algo in ("ec-lsvrg", "ec-lsvrg-diana") else None

    # The gradient estimate of worker tau at x (minus at ref), on the rows
    # the trace says it drew, or on its whole shard.
    def local_grad(self, rec, tau, x, ref=None):
        pb = self.pb
        if self.stochastic:
            rows = rec["rows"].get(tau)
            if rows is None or len(rows) != self.batch:
                raise Mismatch("round %d: worker %d has no rows of %d" % (rec["round"], tau, self.batch))
            lo, hi = pb.shards[tau]
            if rows.min() < lo or rows.max() >= hi:
                raise Mismatch("worker %d drew a row outside its shard" % tau)
            g = pb.grad_rows(tau, x, rows)
            return g - pb.grad_rows(tau, ref, rows) if ref is not None else g
        g = pb.grad_shard(tau, x)
        return g - pb.grad_shard(tau, ref) if ref is not None else g

    def compress(self, rec, tau, t, which="q", kind_of=None):
        kind, k, s = self.shift if (kind_of or which) == "shift" else self.comp
        if which == "down":
            kind, k, s = self.down
        choice = rec[which].get(tau)
        if kind != "none" and choice is None:
            raise Mismatch("round %d: worker %d's %s has no record" % (rec["round"], tau, which))
        return self.Q.apply(kind, k, s, t, choice)

    def ef(self, rec, tau, g, gamma):
        """Error feedback: t = e + gamma g; q = Q(t); e = t - q."""
        t = self.e[tau] + gamma * g
        q = self.compress(rec, tau, t)
        self.e[tau] = t - q
        return q

    def init(self):
        pb, n = self.pb, self.n
        if self.algo in ("eclk", "lkatyusha", "ec-lsvrg-qian"):
            self.u = sum(pb.grad_shard(t, self.w) for t in range(n)) / n
        if self.watch:
            self.P0 = self.P_best = pb.value(self.w)
            self.w_best, self.u_best = self.w.copy(), self.u.copy()
        elif self.algo in ("ef21", "econtrol"):
            self.h = [pb.grad_shard(t, self.x) for t in range(n)]
            self.u = sum(self.h) / n

    def sample(self, rec):
        """The workers of this round: all of them, or the r the trace says
        were drawn, distinct, and the only ones whose messages it has."""
        if self.r == self.n:
            if "part" in rec:
                raise Mismatch("round %d: a sample without partial participation" % rec["round"])
            return list(range(self.n))
        part = rec.get("part")
        if part is None or len(part) != self.r or len(set(part)) != self.r \
                or min(part) < 0 or max(part) >= self.n:
            raise Mismatch("round %d: the sample %s is not %d distinct workers of %d"
                           % (rec["round"], part, self.r, self.n))
        for tag in ("q", "rows"):
            extra = set(rec[tag]) - set(part)
            if extra:
                raise Mismatch("round %d: worker %d is not sampled but has %s"
                               % (rec["round"], min(extra), tag))
        return sorted(part)

    def round(self, rec):
        a = self.algo
        if a in ("eclk", "lkatyusha"):
            return self.katyusha(rec)
        if a == "ef21":
            return self.ef21(rec)
        if a == "ec-lsvrg-qian":
            return self.lsvrg_qian(rec)
        if a == "adiana":
            return self.adiana(rec)
        if a == "econtrol":
            return self.econtrol(rec)
        if a == "adef":
            return self.adef(rec)
        n, pb, gamma = self.n, self.pb, self.gamma
        qs = []
        shifts = []
        sample = set(self.sample(rec))
        # The workers' point: x, or EF21-P's w_t.
        at = self.wp if self.down else self.x
        for tau in range(n):
            if a == "ec-lsvrg":
                g = self.local_grad(rec, tau, self.x, self.w_loc[tau]) + self.mu_loc[tau]
                qs.append(self.ef(rec, tau, g, gamma))
                # Each worker refreshes w_tau = x with its own coin.
                if rec["refresh"].get(tau):
                    self.w_loc[tau] = self.x.copy()
                    self.mu_loc[tau] = pb.grad_shard(tau, self.x)
            elif a in ("ec-sgd-diana", "ec-gd-diana", "ec-lsvrg-diana"):
                # Gorbunov et al.'s EC-SGD-DIANA; for EC-LSVRG-DIANA g_hat
                # is the loopless SVRG estimator at the worker's own w_tau.
                if a == "ec-lsvrg-diana":
                    g_hat = self.local_grad(rec, tau, self.x, self.w_loc[tau]) + self.mu_loc[tau]
                else:
                    g_hat = self.local_grad(rec, tau, at)
                g = g_hat - self.h[tau] + self.u
                qs.append(self.ef(rec, tau, g, gamma))
                msg = self.compress(rec, tau, g_hat - self.h[tau], "shift")
                self.h[tau] = self.h[tau] + self.alpha * msg
                shifts.append(msg)
                if a == "ec-lsvrg-diana" and rec["refresh"].get(tau):
                    self.w_loc[tau] = self.x.copy()
                    self.mu_loc[tau] = pb.grad_shard(tau, self.x)
            else:       # ec-sgd, ec-gd, gd, sgd
                if tau in sample:
                    qs.append(self.ef(rec, tau, self.local_grad(rec, tau, at), gamma))
        # gd, sgd: the mean over the sampled workers (all n but for them).
        x_next = pb.prox(self.x - sum(qs) / len(qs), gamma * pb.lam1)
        if self.down:
            # EF21-P: w_{t+1} = w_t + C_down(x_{t+1} - w_t).
            self.wp = self.wp + self.compress(rec, 0, x_next - self.wp, "down")
        elif rec["down"]:
            raise Mismatch("round %d: a broadcast choice without EF21-P" % rec["round"])
        self.x = x_next
        if shifts:
            self.u = self.u + self.alpha * (sum(shifts) / n)

    def ef21(self, rec):
        n, pb, gamma = self.n, self.pb, self.gamma
        x_new = pb.prox(self.x - gamma * self.u, gamma * pb.lam1)
        cs = []
        # EF21-PP: only the sampled workers move their g_tau; g stays the
        # mean of all n, so the sum of their changes is divided by n.
        for tau in self.sample(rec):
            c = self.compress(rec, tau, pb.grad_shard(tau, x_new) - self.h[tau])
            self.h[tau] = self.h[tau] + c
            cs.append(c)
        self.x = x_new
        self.u = self.u + sum(cs) / n

    def lsvrg_qian(self, rec):
        """Qian, Dong, Richtarik and Zhang's EC-LSVRG, written from
        docs/algorithms.md, "EC-LSVRG (Qian et al.)": each worker compresses
        e + gamma (grad_S(x) - grad_S(w)); the server steps
        x' = prox(x - mean q - gamma grad f(w)); one shared coin of
        probability p makes w = x (before the step) and grad f(w) is then
        recomputed in full."""
        n, pb, gamma = self.n, self.pb, self.gamma
        if not close(rec["constants"][0], gamma):
            raise Mismatch("round %d: gamma %.17g by docs/algorithms.md, the engine %.17g"
                           % (rec["round"], gamma, rec["constants"][0]))
        qs = [self.ef(rec, tau, self.local_grad(rec, tau, self.x, self.w), gamma)
              for tau in range(n)]
        x_new = pb.prox(self.x - sum(qs) / n - gamma * self.u, gamma * pb.lam1)
        if rec["coin"]:
            self.w = self.x.copy()
            self.u = sum(pb.grad_shard(t, self.w) for t in range(n)) / n
        self.x = x_new

    def econtrol(self, rec):
        """EControl (Gao, Islamov and Stich 2024), written from
        docs/algorithms.md, "EControl": each worker compresses
        Delta = C(eta e + g - h_tau), keeps e += g - h_tau - Delta and
        h_tau += Delta; the server steps x' = prox(x - gamma (h + mean
        Delta)) and h += mean Delta."""
        n, pb, gamma, eta = self.n, self.pb, self.gamma, self.eta_ec
        deltas = []
        for tau in range(n):
            t = self.local_grad(rec, tau, self.x) - self.h[tau]
            D = self.compress(rec, tau, eta * self.e[tau] + t)
            self.e[tau] = self.e[tau] + t - D
            self.h[tau] = self.h[tau] + D
            deltas.append(D)
        self.u = self.u + sum(deltas) / n
        self.x = pb.prox(self.x - gamma * self.u, gamma * pb.lam1)

    def adiana(self, rec):
        """ADIANA (Li, Kovalev, Qian and Richtarik 2020), written from
        docs/algorithms.md, "ADIANA": x = theta1 z + theta2 w + (1 - theta1
        - theta2) y; each worker sends C(grad f_tau(x) - h_tau) and
        C(grad f_tau(w) - h_tau), both with the unbiased compressor, and
        moves h_tau by alpha times the second; g = mean of the first + h;
        y' = prox(x - eta g); z' = beta z + (1 - beta) x + (gamma/eta)(y' - x);
        the coin sets w = y; h moves by alpha times the mean of the second."""
        n, pb, eta = self.n, self.pb, self.gamma
        theta1, theta2, gamma, beta = adiana_constants(pb.lam2, self.p, eta)
        for mine, theirs, name in zip((eta, theta1, gamma, beta), rec["constants"],
                                      ("eta", "theta1", "gamma", "beta")):
            if not close(mine, theirs):
                raise Mismatch("round %d: %s %.17g by docs/algorithms.md, the engine %.17g"
                               % (rec["round"], name, mine, theirs))
        x = theta1 * self.zv + theta2 * self.w + (1.0 - theta1 - theta2) * self.y
        gs, ws = [], []
        for tau in range(n):
            gs.append(self.compress(rec, tau, pb.grad_shard(tau, x) - self.h[tau], "q", "shift"))
            c = self.compress(rec, tau, pb.grad_shard(tau, self.w) - self.h[tau], "shift")
            self.h[tau] = self.h[tau] + self.alpha * c
            ws.append(c)
        g = sum(gs) / n + self.u
        y_new = pb.prox(x - eta * g, eta * pb.lam1)
        self.zv = beta * self.zv + (1.0 - beta) * x + (gamma / eta) * (y_new - x)
        if rec["coin"]:
            self.w = self.y.copy()
        self.y = y_new
        self.u = self.u + self.alpha * (sum(ws) / n)
        self.x = theta1 * self.zv + theta2 * self.w + (1.0 - theta1 - theta2) * self.y

    def adef(self, rec):
        """ADEF (Gao, Rodomanov, Rack, Stich, arXiv 2503.08427), round t in
        the paper's notation: theta = x, nu = zv, A = A_t; the weight
        a_{t+1} solves a_{t+1}^2 = gamma A_{t+1}, A_{t+1} = A_t + a_{t+1};
        y_t = (A_t theta_t + a_{t+1} nu_t) / A_{t+1};  g_t^i at y_t;
        worker: dt = g - gt^i, Dt = C(dt), gt^i += Dt;
                d = g - gt^i - e^i / a_{t+1}, D = C(d), e^i = a_{t+1} (D - d);
        server: gt += mean Dt; g_hat = gt + mean D;
                nu_{t+1} = prox_{a psi}(nu_t - a_{t+1} g_hat);
                theta_{t+1} = (A_t theta_t + a_{t+1} nu_{t+1}) / A_{t+1}."""
        n, pb, gamma = self.n, self.pb, self.gamma
        A = self.A
        a = (gamma + math.sqrt(gamma * gamma + 4.0 * gamma * A)) / 2.0
        if not close(a * a, gamma * (A + a), 1e-12):
            raise Mismatch("round %d: a_{t+1} does not solve a^2 = gamma A_{t+1}" % rec["round"])
        A1 = A + a
        y = (A / A1) * self.x + (a / A1) * self.zv
        dts, Ds = [], []
        for tau in range(n):
            g = self.local_grad(rec, tau, y)
            dt = self.compress(rec, tau, g - self.h[tau], "diff")
            self.h[tau] = self.h[tau] + dt
            delta = g - self.h[tau] - self.e[tau] / a
            D = self.compress(rec, tau, delta)
            self.e[tau] = a * (D - delta)
            dts.append(dt)
            Ds.append(D)
        self.u = self.u + sum(dts) / n
        g_hat = self.u + sum(Ds) / n
        self.zv = pb.prox(self.zv - a * g_hat, a * pb.lam1)
        self.x = (A / A1) * self.x + (a / A1) * self.zv
        self.A = A1

    def katyusha(self, rec):
        n, pb = self.n, self.pb
        if rec["restarts"] != self.restarts:
            if not self.watch:
                raise Mismatch("round %d: a guard restart, which this reference does not "
                               "model for rule %s" % (rec["round"], self.rule))
            raise Mismatch("round %d: %d restarts by the objective guard, the engine %d"
                           % (rec["round"], self.restarts, rec["restarts"]))
        # adaptive: the plain constants, times ADAPTIVE_BACKOFF at each
        # restart until one from the second on, fired by a rise of P past
        # ADAPTIVE_SEVERE of P(x0) - best, falls back to the online rule's,
        # doubled at each later restart.
        if self.rule == "adaptive":
            want = eclk_inflation(self.delta_eff) * self.guard if self.fallen_back \
                else self.guard
            if not close(rec["inflation"], want):
                raise Mismatch("round %d: inflation %.17g after %d restarts, the engine %.17g"
                               % (rec["round"], want, self.restarts, rec["inflation"]))
        # ECLK's contraction in use: the reference's own estimate must be
        # the engine's; the constants follow from the engine's inflation
        # (its rule for the inflation is checked where docs/algorithms.md
        # fixes it: the nominal and online rules before any restart).
        if not close(self.delta_eff, rec["delta_eff"], 1e-9):
            raise Mismatch("round %d: delta_eff %.17g by this reference's estimate, the "
                           "engine %.17g" % (rec["round"], self.delta_eff, rec["delta_eff"]))
        if self.algo == "eclk" and self.rule in ("nominal", "online") and \
                not close(eclk_inflation(rec["delta_eff"]), rec["inflation"]):
            raise Mismatch("round %d: inflation %.17g by docs/algorithms.md, the engine %.17g"
                           % (rec["round"], eclk_inflation(rec["delta_eff"]), rec["inflation"]))
        gamma, theta1, eta, sigma = katyusha_constants(self.L_eff, self.pb.lam2, self.p,
                                                       rec["inflation"])
        gamma *= self.step_multiplier
        for mine, theirs, name in zip((gamma, theta1, eta, sigma), rec["constants"],
                                      ("gamma", "theta1", "eta", "sigma")):
            if not close(mine, theirs):
                raise Mismatch("round %d: %s %.17g by docs/algorithms.md, the engine %.17g"
                               % (rec["round"], name, mine, theirs))
        theta2 = 0.5
        x = theta1 * self.zv + theta2 * self.w + (1.0 - theta1 - theta2) * self.y
        self.x_now = x
        qs = []
        for tau in range(n):
            D = self.local_grad(rec, tau, x, self.w)
            if self.algo == "lkatyusha":
                qs.append(gamma * D)
            else:
                t = self.e[tau] + gamma * D
                self.acc_in += float(t @ t)
                qs.append(self.ef(rec, tau, D, gamma))
                self.acc_out += float(self.e[tau] @ self.e[tau])
        v = sum(qs) / n
        # The guard's look between coin rounds, every 20 rounds: P at the y
        # the round starts from.
        Py = None
        if self.watch and not rec["coin"] and rec["round"] - 1 > 0 and \
                (rec["round"] - 1) % 20 == 0:
            Py = pb.value(self.y)
        es = eta * sigma
        z_new = pb.prox((es * x + self.zv - v - gamma * self.u) / (1.0 + es),
                        gamma * pb.lam1 / (1.0 + es))
        if rec["coin"]:
            self.w = self.y.copy()
            self.u = sum(pb.grad_shard(t, self.w) for t in range(n)) / n
        self.y = x + theta1 * (z_new - self.zv)
        self.zv = z_new
        # On a coin round the workers report their sums since the last one;
        # from round 1/delta on they enter the estimate, never below the
        # nominal delta.
        # The objective guard: a w with a smaller P is the new snapshot; a P
        # risen above the best by half of P(x0) - best restarts every
        # sequence from the snapshot with empty memories.
        # A restart from the second on whose P rose past ADAPTIVE_SEVERE of
        # P(x0) - best falls back to the online rule's constants from the
        # nominal delta, measured from that round on; any other multiplies
        # the inflation by ADAPTIVE_BACKOFF (2 once fallen back).
        fired = None
        if rec["coin"] and self.watch:
            Pw = pb.value(self.w)
            if Pw < self.P_best:
                self.P_best = Pw
                self.w_best, self.u_best = self.w.copy(), self.u.copy()
            elif Pw - self.P_best > ADAPTIVE_FIRE * (self.P0 - self.P_best):
                fired = Pw
        elif Py is not None and Py - self.P_best > ADAPTIVE_FIRE * (self.P0 - self.P_best):
            fired = Py
        restarted = fired is not None
        if restarted:
            self.restarts += 1
            self.w, self.y, self.zv = self.w_best.copy(), self.w_best.copy(), \
                self.w_best.copy()
            self.u = self.u_best.copy()
            self.e = [np.zeros_like(self.w) for _ in range(n)]
            if not self.fallen_back and self.restarts >= 2 and \
                    fired - self.P_best > ADAPTIVE_SEVERE * (self.P0 - self.P_best):
                self.fallen_back = True
                self.restart_round = rec["round"]
                self.delta_eff = self.delta
                self.guard = 1.0
            else:
                self.guard *= 2.0 if self.fallen_back else ADAPTIVE_BACKOFF
            self.est_in = self.est_out = self.acc_in = self.acc_out = 0.0
        measuring = self.rule == "online" or self.fallen_back
        if rec["coin"] and measuring and not restarted:
            if (rec["round"] - self.restart_round) * self.delta >= 1.0 and self.acc_in > 0.0:
                self.est_in += self.acc_in
                self.est_out += self.acc_out
                self.delta_eff = min(max(1.0 - self.est_out / self.est_in, self.delta), 1.0)
            self.acc_in = self.acc_out = 0.0

    def state(self):
        s = {"x": self.x, "u": self.u}
        if self.down:
            # The engine's replicas hold the proxy in x; the server's x_t
            # is xs.
            s = {"x": self.wp, "xs": self.x, "u": self.u}
        if self.algo in ("eclk", "lkatyusha"):
            s = {"y": self.y, "z": self.zv, "w": self.w, "u": self.u}
        elif self.algo == "ec-lsvrg-qian":
            s = {"x": self.x, "w": self.w, "u": self.u}
        elif self.algo == "adiana":
            s = {"x": self.x, "y": self.y, "z": self.zv, "w": self.w, "u": self.u}
        elif self.algo == "adef":
            # y is the next round's point: the engine writes y_{t+1}.
            A1 = self.A + (self.gamma + math.sqrt(self.gamma ** 2 + 4.0 * self.gamma * self.A)) / 2.0
            y = (self.A / A1) * self.x + ((A1 - self.A) / A1) * self.zv
            s = {"x": self.x, "z": self.zv, "y": y, "u": self.u,
                 "A": np.array([self.A])}
        return s


def deviation(mine, theirs):
    return float(np.max(np.abs(mine - theirs)) / max(1.0, float(np.max(np.abs(theirs)))))


def check_constants(head, pb, shards):
    """L and L_f as docs/algorithms.md defines them, from the data."""
    A, c, lam2 = pb.A, pb.c, pb.lam2
    N = A.shape[0]
    n = len(shards)
    L = max((n * (hi - lo) / N) * c * float(np.max(np.sum(A[lo:hi] ** 2, axis=1))) + lam2
            for lo, hi in shards)
    if not close(L, float(head["problem"]["L"]), 1e-12):
        raise Mismatch("L: %.17g from the data, the engine says %s" % (L, head["problem"]["L"]))
    L_f = c * float(np.linalg.eigvalsh(A.T @ A)[-1]) / N + lam2
    # The engine's L_f comes from a power iteration: close, not exact.
    if not close(L_f, float(head["problem"]["L_f"]), 1e-6):
        raise Mismatch("L_f: %.17g from the data, the engine says %s" % (L_f, head["problem"]["L_f"]))


def main(argv):
    path, tol = argv[1], 1e-10
    if len(argv) > 3 and argv[2] == "--tol":
        tol = float(argv[3])
    head, shards, records = read_trace(path)
    job, prob = head["job"], head["problem"]
    data_dir = os.environ.get("ECOPT_DATA_DIR", ".")
    ds = head["dataset"] if "/" in head["dataset"] else os.path.join(data_dir, head["dataset"])
    A, b = read_libsvm(ds, int(job["d"]))
    pb = Problem(A, b, job["loss"], float(prob["lambda1"]), float(prob["lambda2"]), shards)
    case = "%s %s" % (job["algorithm"], head["compressor"]["_name"])
    if "down" in head:
        case += " down %s" % head["down"]["_name"]
    worst, where, rounds = 0.0, "none: equal bits throughout", 0
    try:
        check_constants(head, pb, shards)
        ref = Reference(head, shards, pb)
        prev_x = None
        for rec in records:
            if rec["init"]:
                ref.init()
            else:
                ref.round(rec)
                rounds = rec["round"]
            mine = ref.state()
            theirs = rec["state"]
            # L-Katyusha's x is made at the start of a round from the
            # constants of that round: the engine's x after round r is
            # checked against the reference's x of round r + 1.
            if job["algorithm"] in ("eclk", "lkatyusha") and not rec["init"] and prev_x is not None:
                mine = dict(mine, x=ref.x_now)
                theirs = dict(theirs, x=prev_x)
            prev_x = rec["state"].get("x")
            for name, v in mine.items():
                if name not in theirs:
                    if name == "xs":
                        raise Mismatch("round %d: the engine wrote no server iterate xs"
                                       % rec["round"])
                    continue
                dev = deviation(v, theirs[name])
                if not dev <= worst:
                    worst, where = dev, "%s at round %d" % (name, rec["round"])
                if not dev <= tol:
                    raise Mismatch("round %d: %s deviates by %.3g (over %g)"
                                   % (rec["round"], name, dev, tol))
    except Mismatch as err:
        print("FAIL %-26s %s" % (case, err))
        return 1
    print("ok   %-26s %4d rounds, max deviation %.2e (%s), near ties %d"
          % (case, rounds, worst, where, ref.Q.near_ties))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
