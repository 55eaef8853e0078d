package leader

import (
	"testing"

	componentbaseconfigv1 "k8s.io/component-base/config/v1alpha1"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
)

// TestLeads walks one process through what the scheduler publishes as it starts: nothing yet, its
// configuration with leader election off or on, and the elector's gauge before and after it holds
// the lease (as the scheduler's elector names itself, whatever the lease's name).
func TestLeads(t *testing.T) {
	if Leads() {
		t.Fatal("Leads() before the scheduler published its configuration")
	}
	cz, err := configz.New("componentconfig")
	if err != nil {
		t.Fatal(err)
	}
	// What the scheduler publishes: its versioned configuration.
	cfg := func(elect bool) *configv1.KubeSchedulerConfiguration {
		c := &configv1.KubeSchedulerConfiguration{LeaderElection: componentbaseconfigv1.LeaderElectionConfiguration{LeaderElect: ptr.To(elect)}}
		c.SetGroupVersionKind(configv1.SchemeGroupVersion.WithKind("KubeSchedulerConfiguration"))
		return c
	}
	if err := cz.Set(cfg(false)); err != nil {
		t.Fatal(err)
	}
	if !Leads() {
		t.Fatal("Leads() = false without leader election")
	}
	if err := cz.Set(cfg(true)); err != nil {
		t.Fatal(err)
	}
	if Leads() {
		t.Fatal("Leads() with leader election on and no elector gauge")
	}
	g := metrics.NewGaugeVec(&metrics.GaugeOpts{Name: GaugeName, Help: "test"}, []string{"name"})
	legacyregistry.MustRegister(g)
	g.WithLabelValues("kube-scheduler").Set(0)
	if Leads() {
		t.Fatal("Leads() while the elector does not hold the lease")
	}
	g.WithLabelValues("kube-scheduler").Set(1)
	if !Leads() {
		t.Fatal("Leads() = false once the elector holds the lease")
	}
}
