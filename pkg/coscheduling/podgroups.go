package coscheduling

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// podGroupResource is the plural resource name of PodGroup.
const podGroupResource = "podgroups"

// podGroupEventResource names PodGroup events for EventsToRegister: <plural>.<version>.<group>, the form
// the scheduler resolves to a dynamic informer.
const podGroupEventResource = podGroupResource + ".v1alpha1." + v1alpha1.GroupName

var (
	pgScheme         = runtime.NewScheme()
	pgCodecs         = serializer.NewCodecFactory(pgScheme)
	pgParameterCodec = runtime.NewParameterCodec(pgScheme)
)

func init() {
	utilruntime.Must(v1alpha1.AddToScheme(pgScheme))
}

// podGroupClient is a small typed REST client for PodGroups: list and watch for the informer, and a
// merge patch of the status subresource for the status updater. No generated clientset is needed.
type podGroupClient struct {
	rc rest.Interface
}

// newPodGroupClient builds a PodGroup client from the scheduler's connection. CRDs speak JSON only, so
// the content type is forced to JSON whatever the scheduler's own client uses.
func newPodGroupClient(cfg *rest.Config) (*podGroupClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = pgCodecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("building the %s client: %w", v1alpha1.SchemeGroupVersion, err)
	}
	return &podGroupClient{rc: rc}, nil
}

func (c *podGroupClient) list(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.PodGroupList, error) {
	out := &v1alpha1.PodGroupList{}
	err := c.rc.Get().Resource(podGroupResource).VersionedParams(&opts, pgParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *podGroupClient) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rc.Get().Resource(podGroupResource).VersionedParams(&opts, pgParameterCodec).Watch(ctx)
}

// patchStatus applies a JSON merge patch to a PodGroup's status subresource.
func (c *podGroupClient) patchStatus(ctx context.Context, namespace, name string, patch []byte) error {
	return c.rc.Patch(types.MergePatchType).Namespace(namespace).Resource(podGroupResource).Name(name).
		SubResource("status").Body(patch).Do(ctx).Error()
}

// newPodGroupInformer returns an informer over every PodGroup of the cluster.
func newPodGroupInformer(c *podGroupClient) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformer(lw, &v1alpha1.PodGroup{}, 0, cache.Indexers{})
}

// podGroupLister reads PodGroups from an informer's store.
type podGroupLister struct {
	store cache.Store
}

// get returns the PodGroup namespace/name, or nil when the cache does not hold it.
func (l podGroupLister) get(namespace, name string) *v1alpha1.PodGroup {
	obj, ok, err := l.store.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	pg, _ := obj.(*v1alpha1.PodGroup)
	return pg
}
