# medians.awk reads the log of scripts/bench-ab ("== SIDE PATH TIME" lines,
# then go test's Benchmark lines) and prints, as a Markdown table, for each
# benchmark and figure, the median of the rounds' values on each side (the
# mean of the two middle ones for an even count) and their range. A figure
# only one side has is left out. systemtest/bench_ab_test.go checks it.
/^== / { side = $2; next }
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i += 2) {
		key = name SUBSEP side SUBSEP $(i + 1)
		n[key]++; v[key, n[key]] = $i
		if (!(name SUBSEP $(i + 1) in seen)) { seen[name SUBSEP $(i + 1)] = 1; order[++count] = name SUBSEP $(i + 1) }
	}
}
function median(key,    m, i, j, t, a) {
	m = n[key]
	for (i = 1; i <= m; i++) a[i] = v[key, i] + 0
	for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	lo = a[1]; hi = a[m]
	return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	printf "| benchmark | figure | before | after |\n|---|---|---:|---:|\n"
	for (k = 1; k <= count; k++) {
		split(order[k], parts, SUBSEP)
		b = parts[1] SUBSEP "before" SUBSEP parts[2]; a = parts[1] SUBSEP "after" SUBSEP parts[2]
		if (!(b in n) || !(a in n)) continue
		mb = median(b); lb = lo; hb = hi
		ma = median(a); la = lo; ha = hi
		printf "| %s | %s | %.4g [%.4g–%.4g] | %.4g [%.4g–%.4g] |\n", parts[1], parts[2], mb, lb, hb, ma, la, ha
	}
}