package deploy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/run"
)

// scheduleAfterWeekEnd returns how long after the ISO week's end (Monday
// 00:00 in the CronJob's zone) a weekly schedule "M H * * D" fires.
func scheduleAfterWeekEnd(schedule string) (time.Duration, bool) {
	f := strings.Fields(schedule)
	if len(f) != 5 || f[2] != "*" || f[3] != "*" {
		return 0, false
	}
	minute, err1 := strconv.Atoi(f[0])
	hour, err2 := strconv.Atoi(f[1])
	dow, err3 := strconv.Atoi(f[4])
	if err1 != nil || err2 != nil || err3 != nil || minute < 0 || minute > 59 || hour < 0 || hour > 23 || dow < 0 || dow > 7 {
		return 0, false
	}
	days := (dow + 6) % 7 // Monday 0 … Sunday 6 (0 and 7 are Sunday)
	return time.Duration(days)*24*time.Hour + time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute, true
}

func TestScheduleAfterWeekEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		want time.Duration
		ok   bool
	}{
		{"0 6 * * 1", 6 * time.Hour, true},
		{"30 2 * * 1", 2*time.Hour + 30*time.Minute, true},
		{"0 9 * * 2", 33 * time.Hour, true},
		{"0 23 * * 0", 6*24*time.Hour + 23*time.Hour, true},
		{"0 6 1 * *", 0, false},
		{"0 6 * * MON", 0, false},
	} {
		got, ok := scheduleAfterWeekEnd(tc.s)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %v, %v; want %v, %v", tc.s, got, ok, tc.want, tc.ok)
		}
	}
}

// Issue 19: the weekly run pins the week's cutoff, its end plus
// DIGEST_SETTLE, and refuses the week before it. The CronJob must fire at
// least DIGEST_SETTLE (the ConfigMap's, or the default) after the week's
// end in its zone, or every Monday run would exit 2.
func TestCronJobRunsAfterTheWeeksCutoff(t *testing.T) {
	t.Parallel()
	forEachBuild(t, func(t *testing.T, m *manifests) {
		settle := run.DefaultSettle
		if v, ok := m.configMap(t).Data["DIGEST_SETTLE"]; ok {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				t.Fatalf("configmap DIGEST_SETTLE=%q: want a positive duration", v)
			}
			settle = d
		}
		// The weekly sender: the CronJob's run, or "digest schedule"'s
		// --cron (components/schedule), with the run's flags.
		type sender struct {
			args     []string
			schedule string
		}
		senders := map[string]sender{}
		for n, c := range m.cronJobs {
			if args := c.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args; args[0] == "run" {
				senders[n] = sender{args, c.Spec.Schedule}
			}
		}
		for n, d := range m.deployments {
			if args := d.Spec.Template.Spec.Containers[0].Args; args[0] == "schedule" {
				cron, _ := flagValue(args, "cron")
				senders[n] = sender{args, cron}
			}
		}
		weekly := len(senders)
		for n, c := range senders {
			args := c.args
			s := settle
			if v, ok := flagValue(args, "settle"); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatalf("%s: --settle %q: %v", n, v, err)
				}
				s = d
			}
			after, ok := scheduleAfterWeekEnd(c.schedule)
			if !ok {
				t.Fatalf("%s: schedule %q: want a weekly \"M H * * D\"", n, c.schedule)
			}
			if after < s {
				t.Errorf("%s: schedule %q fires %s after the week's end, before its cutoff (the end plus DIGEST_SETTLE=%s): the run would refuse the week",
					n, c.schedule, after, s)
			}
		}
		if weekly != 1 {
			t.Errorf("%d CronJobs run digest run or Deployments digest schedule; want one", weekly)
		}
	})
}
