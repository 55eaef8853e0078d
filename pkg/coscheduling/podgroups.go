package coscheduling

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
	pginformers "github.com/custom-scheduler/custom-scheduler/pkg/generated/informers/externalversions/scheduling/v1alpha1"
)

// podGroupResource is the plural resource name of PodGroup.
const podGroupResource = "podgroups"

// podGroupEventResource names PodGroup events for EventsToRegister: <plural>.<version>.<group>, the form
// the scheduler resolves to a dynamic informer.
const podGroupEventResource = podGroupResource + ".v1alpha1." + v1alpha1.GroupName

// newPodGroupClient builds the generated PodGroup clientset on the scheduler's connection. CRDs speak
// JSON only, so the content type is forced to JSON whatever the scheduler's own client uses.
func newPodGroupClient(cfg *rest.Config) (versioned.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	cs, err := versioned.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("building the %s client: %w", v1alpha1.SchemeGroupVersion, err)
	}
	return cs, nil
}

// newPodGroupInformer returns the generated informer over every PodGroup of the cluster.
func newPodGroupInformer(cs versioned.Interface) cache.SharedIndexInformer {
	return pginformers.NewPodGroupInformer(cs, metav1.NamespaceAll, 0, cache.Indexers{})
}
